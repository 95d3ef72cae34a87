"""The fixtures tests share: checkpoints built once a session, servers (in this process or the real CLI in a
subprocess), and the browser: one Chromium for the whole run, a new context for each test."""

import itertools
from pathlib import Path

import pytest

from engines.fake import FakeEngine
from tests.support.browser import (CHROMIUM_ARGS, DESKTOP, Tab, chromium_env, chromium_executable, collect_errors,
                                   wait_ready)
from tests.support.harness import ServerProcess
from tests.support.hub_cache import HF_BASE
from tests.support.servers import LiveServer
from webapp.precision import keep_float32_exact


def pytest_configure(config):
    """float32 products as the app runs them (webapp/precision.py), before any test imports MLX: on a GPU or an
    M5 the identity tests would otherwise verify in TF32."""
    keep_float32_exact()


def pytest_collection_modifyitems(items):
    """Make test's workers take whole files in this order: the files with long model runs first, so that the
    longest start early and the workers end together, each followed by a browser file, which mostly waits on
    timers and frames, so that the worker beyond the cores has its waits to fill rather than a third model run."""
    def files(mark: str) -> list:
        return list(dict.fromkeys(item.path for item in items if item.get_closest_marker(mark)))

    slow = files("slow")
    browser = [path for path in files("browser") if path not in slow]
    paired = [path for pair in itertools.zip_longest(slow, browser) for path in pair if path is not None]
    rank = {path: n for n, path in enumerate(paired)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A real qwen3_5 checkpoint with a bundled MTP head (random weights), built in about a second."""
    from demo_model.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3_5")


@pytest.fixture(scope="session")
def hf_base(tmp_path_factory) -> tuple[Path, Path]:
    """(folder, hub cache): a float Qwen 3.5 checkpoint (bfloat16) in Hugging Face layout, with its MTP head
    in its own indexed shard, and a hub cache holding it as HF_BASE."""
    from demo_model.hf_layout import add_to_hub_cache, build_hf_checkpoint

    root = tmp_path_factory.mktemp("hf")
    hf = build_hf_checkpoint(root / "Tiny-Qwen3.5")
    add_to_hub_cache(hf, root / "hub", HF_BASE)
    return hf, root / "hub"


@pytest.fixture(scope="session")
def float16_base(tmp_path_factory) -> Path:
    """The hf_base checkpoint's shapes in float16, in Hugging Face layout."""
    from demo_model.hf_layout import build_hf_checkpoint

    return build_hf_checkpoint(tmp_path_factory.mktemp("hf") / "Tiny-f16", dtype="float16")


@pytest.fixture(scope="session")
def demo_runner():
    """The shipped demo model loaded once for every test that asks it (training.evaluate's Runner)."""
    from demo_model import DEFAULT_MODEL
    from training.evaluate import Runner

    return Runner(str(DEFAULT_MODEL))


@pytest.fixture(scope="session")
def converted(hf_base, tmp_path_factory) -> tuple[Path, Path]:
    """(headless, split): ``mlx_vlm.convert -q --q-bits 4 --q-group-size 64`` of HF_BASE by its hub id,
    without --mtp (its card names HF_BASE as base_model, as a hub conversion's does), and of the folder with
    --mtp (the head written beside it, as Tiny-4bit-split-mtp)."""
    from demo_model.hf_layout import convert

    hf, cache = hf_base
    root = tmp_path_factory.mktemp("converted")
    headless = convert(HF_BASE, root / "Tiny-4bit", bits=4, group_size=64, hub_cache=cache)
    split = convert(hf, root / "Tiny-4bit-split", bits=4, group_size=64, mtp=True)
    return headless, split


@pytest.fixture
def fake_server(tmp_path):
    server = LiveServer(FakeEngine(delay_s=0.01), tmp_path / "data")
    yield server
    server.stop()


@pytest.fixture
def start_server(tmp_path):
    """Start real servers on the CLI; each is stopped at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, data_dir: Path | None = None) -> ServerProcess:
        server = ServerProcess(list(args), data_dir or tmp_path / "data")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def mlx_server(tiny_model, tmp_path_factory):
    """One real server on the tiny model, shared by a module's tests."""
    server = ServerProcess(["--model", str(tiny_model)], tmp_path_factory.mktemp("data"))
    server.wait_ready()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the whole run: each test opens contexts of its own and closes them."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), headless=True, args=CHROMIUM_ARGS,
                                    env=chromium_env())
        yield browser
        browser.close()


@pytest.fixture
def open_page(browser, fake_server):
    """open_page(size, path) → a page on the fake server, ready; no page may log an error."""
    contexts, errors = [], []

    def open_(size=DESKTOP, path="/"):
        context = browser.new_context(viewport={"width": size[0], "height": size[1]}, accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        collect_errors(page, errors)
        page.goto(fake_server.url + path)
        wait_ready(page)
        return page

    open_.expected = []  # console errors a test causes on purpose (a refused import logs its 400)
    yield open_
    for context in contexts:
        context.close()
    assert [e for e in errors if not any(x in e for x in open_.expected)] == []


@pytest.fixture
def tab(browser, fake_server) -> Tab:
    """A tab on the fake server that records its frames; ``tab.open()`` loads the page. No page error may show."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    errors = []
    collect_errors(page, errors)
    yield Tab(page, fake_server)
    context.close()
    assert errors == []


@pytest.fixture(scope="session")
def vision_model(tmp_path_factory) -> Path:
    """A tiny Qwen 3.5 that can see, as users get one: a small vision tower and Qwen3-VL's image processor
    config (an image is 4 to 64 tokens) in Hugging Face layout, converted by ``mlx_vlm.convert -q --mtp`` (the
    head beside it, as ``Tiny-VL-4bit-mtp``)."""
    from demo_model.hf_layout import build_vision_checkpoint

    return build_vision_checkpoint(tmp_path_factory.mktemp("vision") / "Tiny-VL-4bit")
