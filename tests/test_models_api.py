"""GET /api/models: checkpoints in a Hugging Face cache laid out as huggingface_hub does, in the models folder
(the data folder's models/ by default, or --models-dir), and the bundled demo model, with their sizes and MTP
heads; what a server lists at /v1/models; and whether MTPLX can run here."""

import pytest
import requests

from demo_model import DEFAULT_MODEL
from tests.support.hub_cache import MTP, WEIGHTS, blob_bytes, hub_repo, write_checkpoint
from tests.support.peers import Daemon
from webapp.web import models


@pytest.fixture
def hub(tmp_path, monkeypatch):
    cache = tmp_path / "hf" / "hub"
    hub_repo(cache, "acme/drafty", WEIGHTS + MTP, shards=2)
    # A converted checkpoint: its config still declares the MTP layer, its weights dropped it.
    hub_repo(cache, "acme/plain", WEIGHTS, {"text_config": {"mtp_num_hidden_layers": 1}})
    (cache / "models--acme--tokenizer-only" / "snapshots" / "r1").mkdir(parents=True)
    (cache / "models--acme--tokenizer-only" / "snapshots" / "r1" / "tokenizer.json").write_text("{}")
    (cache / "datasets--acme--data").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(models, "apple_silicon", lambda: False)
    monkeypatch.setattr(models, "MTPLX_URL", "http://127.0.0.1:9")  # nothing answers there
    return cache


def by_name(body: dict) -> dict:
    return {m["name"]: m for m in body["models"]}


def test_lists_the_hub_cache_the_models_folder_and_the_bundled_model(hub, fake_server, tmp_path):
    models_dir = fake_server.app.config["MODELS_DIR"]
    assert models_dir == tmp_path / "data" / "models"  # the data folder's models/ by default
    write_checkpoint(models_dir / "local-head", WEIGHTS + MTP)
    write_checkpoint(models_dir / "org" / "nested", WEIGHTS, {"mtp_num_hidden_layers": 0})
    (models_dir / "notes").mkdir()

    response = requests.get(fake_server.url + "/api/models", timeout=10)
    assert response.status_code == 200
    body = response.json()
    found = by_name(body)
    assert set(found) == {DEFAULT_MODEL.name, "local-head", "org/nested", "acme/drafty", "acme/plain"}
    assert [m["source"] for m in body["models"]] == ["bundled", "models-dir", "models-dir", "hf-cache", "hf-cache"]

    drafty = found["acme/drafty"]
    assert drafty == {"name": "acme/drafty", "path": str(hub / "models--acme--drafty" / "snapshots" / "abc123"),
                      "size_bytes": blob_bytes(hub / "models--acme--drafty"), "mtp": True, "drafter": None,
                      "source": "hf-cache"}
    assert found["acme/plain"]["mtp"] is False
    assert found["local-head"]["mtp"] is True and found["local-head"]["path"] == str(models_dir / "local-head")
    assert found["local-head"]["size_bytes"] == sum(f.stat().st_size for f in (models_dir / "local-head").iterdir())
    assert found["org/nested"]["mtp"] is False
    bundled = found[DEFAULT_MODEL.name]
    assert bundled["mtp"] is True and bundled["path"] == str(DEFAULT_MODEL)
    assert bundled["size_bytes"] == sum(f.stat().st_size for f in DEFAULT_MODEL.iterdir() if f.is_file())
    assert body["mtplx"] is False


def test_a_blob_two_snapshot_files_share_is_counted_once(tmp_path):
    snapshot = hub_repo(tmp_path, "acme/twice", WEIGHTS)
    (snapshot / "copy.safetensors").symlink_to(snapshot / "model.safetensors")
    listed = models.hf_cache_models(tmp_path)
    assert [m["size_bytes"] for m in listed] == [blob_bytes(tmp_path / "models--acme--twice")]


def test_refs_main_picks_the_snapshot(tmp_path):
    snapshot = hub_repo(tmp_path, "acme/two-revs", WEIGHTS, revision="new")
    old = snapshot.parent / "old"
    write_checkpoint(old, WEIGHTS + MTP)  # a newer folder on disk, but not the one main names
    assert [m["path"] for m in models.hf_cache_models(tmp_path)] == [str(snapshot)]


def test_the_cache_follows_huggingface_hub_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.hf_hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert models.hf_hub_cache() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    assert models.hf_hub_cache() == tmp_path / "cache"


@pytest.fixture
def daemon():
    started = []

    def start(**kwargs):
        started.append(Daemon(**kwargs))
        return started[-1]

    yield start
    for d in started:
        d.stop()


def test_a_servers_models_and_mtplx_where_a_daemon_answers(hub, fake_server, daemon):
    server = daemon(served=["qwen-a", "qwen-b"])
    body = requests.get(fake_server.url + "/api/models", params={"base_url": server.url + "/v1/"}, timeout=10).json()
    assert body["served"] == {"base_url": server.url + "/v1", "models": ["qwen-a", "qwen-b"], "error": None}
    assert body["mtplx"] is False  # a /v1 URL is an OpenAI server's, not a daemon's root

    body = requests.get(fake_server.url + "/api/models", params={"base_url": server.url}, timeout=10).json()
    assert body["served"]["models"] == ["qwen-a", "qwen-b"]
    assert body["mtplx"] is True

    other = daemon(health_ok=False)
    body = requests.get(fake_server.url + "/api/models", params={"base_url": other.url}, timeout=10).json()
    assert body["mtplx"] is False and body["served"]["models"] == []


def test_mtplx_on_apple_silicon(hub, fake_server, monkeypatch):
    monkeypatch.setattr(models, "apple_silicon", lambda: True)
    assert requests.get(fake_server.url + "/api/models", timeout=10).json()["mtplx"] is True


def test_a_server_that_does_not_answer_says_what_to_do(hub, fake_server, daemon):
    body = requests.get(fake_server.url + "/api/models", params={"base_url": "http://127.0.0.1:9/v1"},
                        timeout=10).json()
    assert body["served"]["models"] == [] and "type the model's name" in body["served"]["error"]["message"]
    assert body["served"]["error"]["code"] == "server_unreachable"
    server = daemon()
    body = requests.get(fake_server.url + "/api/models", params={"base_url": server.url + "/nothing"},
                        timeout=10).json()
    assert body["served"]["error"] == {"code": "no_model_list", "message": body["served"]["error"]["message"]}
    assert "HTTP 404" in body["served"]["error"]["message"]


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "not a url", "file:///etc"])
def test_a_bad_base_url_is_refused(hub, fake_server, url):
    response = requests.get(fake_server.url + "/api/models", params={"base_url": url}, timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "bad_base_url"


def test_models_dir_flag(hub, start_server, tmp_path):
    folder = tmp_path / "elsewhere"
    write_checkpoint(folder / "mine", WEIGHTS + MTP)
    server = start_server("--engine", "fake", "--models-dir", str(folder))
    server.wait_ready()
    found = by_name(requests.get(server.url + "/api/models", timeout=10).json())
    assert found["mine"]["source"] == "models-dir" and found["mine"]["mtp"] is True
    assert found["acme/drafty"]["source"] == "hf-cache"  # the environment reaches the server process


def test_weights_that_cannot_be_read_carry_no_head_whatever_the_config_says(tmp_path):
    """A folder cloned without its large files holds pointer files where the weights should be: it is listed,
    and it has no MTP head to draft with, as the MLX engine sees it too."""
    from engines.mlx.loading import has_bundled_mtp

    folder = tmp_path / "models" / "pointers"
    write_checkpoint(folder, WEIGHTS + MTP, {"model_type": "qwen3_5", "text_config": {"mtp_num_hidden_layers": 1}})
    (folder / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\nsize 123\n")
    assert [(m["name"], m["mtp"]) for m in models.models_dir_models(tmp_path / "models")] == [("pointers", False)]
    assert not has_bundled_mtp(folder)
