"""The engine picker in headless Chromium: it lists the checkpoints in a Hugging Face cache laid out as
huggingface_hub does, one click picks one and the engine switches to it (the real MLX engine on the tiny
model); for a server engine it lists what the typed address serves, and MTPLX is offered only where it can
run or a daemon answers."""

import shutil

import pytest

from tests.support.peers import Daemon
from webapp.web import models

pytestmark = pytest.mark.browser


def hub_copy(cache, repo_id: str, checkpoint) -> str:
    """``checkpoint`` cached as huggingface_hub would: blobs, a snapshot of links to them, refs/main."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for file in checkpoint.iterdir():
        shutil.copy(file, repo / "blobs" / file.name)
        (snapshot / file.name).symlink_to(f"../../blobs/{file.name}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("rev1")
    return str(snapshot)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(models, "apple_silicon", lambda: False)
    monkeypatch.setattr(models, "MTPLX_URL", "http://127.0.0.1:9")  # no daemon there
    return cache


@pytest.fixture
def daemon():
    started = Daemon(served=["served-one", "served-two"])
    yield started
    started.stop()


def choices(page) -> list[str]:
    return page.locator("#engine-form select[name=name] option").evaluate_all("os => os.map(o => o.value)")


def test_pick_a_cached_model_and_switch_to_it(open_page, fake_server, hub, tiny_model):
    snapshot = hub_copy(hub, "specchat/tiny", tiny_model)
    page = open_page()
    page.select_option("#engine-form select[name=name]", "mlx")
    button = page.locator("#model-list .model-choice", has_text="specchat/tiny")
    button.wait_for()
    meta = button.locator(".model-meta").inner_text()
    assert "MTP head" in meta and "no MTP" not in meta and "Hugging Face cache" in meta
    assert page.locator("#model-list .model-choice", has_text="specchat-demo").count() == 1
    assert "mtplx" not in choices(page)  # not Apple Silicon, no daemon

    button.click()
    assert page.input_value("#engine-form [name=model]") == snapshot
    assert button.get_attribute("aria-pressed") == "true"
    page.click("#switch-engine")
    page.wait_for_function(
        "() => document.querySelector('#engine').dataset.state === 'ready'"
        " && document.querySelector('#engine .engine-name').textContent.includes('mlx')", timeout=120_000)
    assert fake_server.host.spec.name == "mlx" and fake_server.host.spec.model == snapshot
    assert fake_server.host.engine.info().state == "ready"


def test_a_servers_models_and_mtplx_where_a_daemon_answers(open_page, hub, daemon):
    page = open_page()
    assert "mtplx" not in choices(page)
    page.select_option("#engine-form select[name=name]", "openai")
    page.fill("#engine-form [name=base_url]", daemon.url + "/v1")
    served = page.locator("#model-list .model-choice", has_text="served-two")
    served.wait_for()
    assert page.locator("#model-list .model-choice").count() == 2
    served.click()
    assert page.input_value("#engine-form [name=model]") == "served-two"
    # The daemon's root address answers /health like MTPLX: now MTPLX is offered.
    page.fill("#engine-form [name=base_url]", daemon.url)
    page.wait_for_function("() => [...document.querySelectorAll('#engine-form select[name=name] option')]"
                           ".some(o => o.value === 'mtplx')")
    # Nothing answers at an address: the list says so, and the name can still be typed.
    page.fill("#engine-form [name=base_url]", "http://127.0.0.1:9/v1")
    page.wait_for_function("() => document.querySelector('#model-status').textContent.includes(\"type the model's name\")")
    assert page.locator("#model-list .model-choice").count() == 0
