"""Engine specs from a tab are held to the command line's policy: http(s) servers on loopback (unless
--allow-remote-engines), the models the picker lists and no downloads (unless --allow-downloads), errors that
tell nothing of the disk, a tab's MTPLX daemon never listening beyond loopback, and upstream error bodies
shown as short plain text. The command line itself names anything."""

import json
import os
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests

from demo_model import DEFAULT_MODEL
from engines import EngineError
from engines.mtplx import MtplxEngine
from engines.openai_compat import OpenAICompatEngine
from engines.registry import EngineSpec, TabPolicy, create_engine
from tests.support.engine_runs import OPTIONS, run
from tests.support.fake_mtplx import FakeDaemon, free_port, install_mtplx
from tests.support.hub_cache import MTP, WEIGHTS, hub_repo
from tests.support.peers import serving
from tests.support.wsclient import WsClient

LISTED = [("specchat-demo", DEFAULT_MODEL)]


@pytest.fixture(scope="module")
def daemon():
    server = FakeDaemon("--model", "org/Qwen3.5-9B-MTPLX")
    yield server
    server.stop()


def refused(server, spec: dict) -> str:
    """The error a tab gets for ``spec``; the engine stays as it was."""
    before = server.host.engine
    with WsClient(server.ws_url) as ws:
        ws.send({"type": "switch_engine", "spec": spec})
        error, _ = ws.until("error")
    assert error["code"] == "invalid_engine" and server.host.engine is before
    return error["message"]


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/v1", "http://10.0.0.1:8080/v1",
                                 "http://192.168.1.20:8080/v1", "http://example.com/v1", "http://0.0.0.0:8766"])
@pytest.mark.parametrize("name", ["openai", "mtplx"])
def test_a_tab_reaches_servers_on_loopback_only(fake_server, name, url):
    message = refused(fake_server, {"name": name, "base_url": url})
    assert "loopback" in message and "--allow-remote-engines" in message


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/v1", "file:///etc/passwd", "127.0.0.1:8080/v1", "http:///v1"])
def test_a_tab_names_http_servers_only(fake_server, url):
    assert "http:// or https://" in refused(fake_server, {"name": "openai", "base_url": url})


def test_a_server_on_loopback_is_reached(fake_server, daemon):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "switch_engine", "spec": {"name": "openai", "base_url": f"http://localhost:{daemon.port}/v1"}})
        frame, _ = ws.until("engine")
        while frame["engine"]["state"] != "ready":
            frame, _ = ws.until("engine")
        assert frame["engine"]["model"] == "mtplx-qwen35-9b-mtplx"


def test_the_picker_cannot_probe_beyond_loopback(fake_server):
    response = requests.get(fake_server.url + "/api/models", params={"base_url": "http://169.254.169.254/"},
                            timeout=10)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_base_url"
    assert "--allow-remote-engines" in response.json()["error"]["message"]


def test_allow_remote_engines_from_the_command_line(daemon, start_server, tmp_path):
    # 0.0.0.0 is no loopback address, yet connecting to it reaches this machine: the fake daemon answers.
    spec = {"name": "openai", "base_url": f"http://0.0.0.0:{daemon.port}/v1"}
    strict = start_server("--engine", "fake", data_dir=tmp_path / "strict")
    strict.wait_ready()
    reply = requests.post(strict.url + "/api/engine", json=spec, timeout=10)
    assert reply.status_code == 400 and "--allow-remote-engines" in reply.json()["error"]["message"]
    allowing = start_server("--engine", "fake", "--allow-remote-engines")
    allowing.wait_ready()
    reply = requests.post(allowing.url + "/api/engine", json=spec, timeout=10)
    assert reply.status_code == 200 and reply.json()["spec"]["base_url"] == spec["base_url"]


def test_a_tab_loads_only_listed_models_and_fetches_nothing():
    policy = TabPolicy(models=lambda: LISTED)
    for name in ("specchat-demo", str(DEFAULT_MODEL)):
        assert policy.restrict(EngineSpec(name="mlx", model=name)).model == str(DEFAULT_MODEL)
    assert policy.restrict(EngineSpec(name="mlx")).model is None  # the bundled model
    with pytest.raises(EngineError) as hub_id:
        policy.restrict(EngineSpec(name="mlx", model="Qwen/Qwen3.5-9B"))
    assert "--allow-downloads" in hub_id.value.message and "specchat-demo" in hub_id.value.message
    with pytest.raises(EngineError):
        policy.restrict(EngineSpec(name="mlx", drafter="Qwen/Qwen3.5-9B-MTP"))
    fetching = TabPolicy(allow_downloads=True, models=lambda: LISTED)
    assert fetching.restrict(EngineSpec(name="mlx", model="Qwen/Qwen3.5-9B")).model == "Qwen/Qwen3.5-9B"
    with pytest.raises(EngineError):  # a path is no hub id, downloads or not
        fetching.restrict(EngineSpec(name="mlx", model="/srv/models/elsewhere"))


def test_a_listed_hub_cache_model_loads_from_its_folder(tmp_path, monkeypatch):
    from webapp.web.models import hf_hub_cache, hf_cache_models

    snapshot = hub_repo(tmp_path / "hub", "acme/drafty", WEIGHTS + MTP)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    policy = TabPolicy(models=lambda: [(m["name"], Path(m["path"])) for m in hf_cache_models(hf_hub_cache())])
    assert policy.restrict(EngineSpec(name="mlx", model="acme/drafty")).model == str(snapshot)


def test_path_errors_tell_nothing_of_the_disk(fake_server, tmp_path):
    (tmp_path / "config.json").write_text("{}")  # a folder that exists and looks half like a model
    messages = {path: refused(fake_server, {"name": "mlx", "model": path}).replace(repr(path), "PATH")
                for path in (str(tmp_path), str(tmp_path / "missing"), "/etc", "./no/such/model")}
    assert len(set(messages.values())) == 1, messages
    message = messages["/etc"]
    assert "exist" not in message and "config.json" not in message and str(tmp_path) not in message


def test_the_command_line_names_any_model_and_server():
    with pytest.raises(EngineError) as missing:  # the operator's own disk: it says what is wrong
        create_engine(EngineSpec(name="mlx", model="/no/such/model"))
    assert "does not exist" in missing.value.message
    engine = create_engine(EngineSpec(name="openai", base_url="http://192.0.2.1:9/v1"))
    assert isinstance(engine, OpenAICompatEngine)
    engine.unload()


@pytest.fixture
def fake_mtplx(tmp_path, monkeypatch):
    install_mtplx(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MTPLX_READY_S", "0")
    monkeypatch.setenv("FAKE_MTPLX_ARGV_LOG", str(tmp_path / "argv.log"))
    return tmp_path / "argv.log"


def started_argv(log: Path) -> list:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_tabs_mtplx_daemon_starts_on_loopback_without_downloads(fake_mtplx):
    url = f"http://127.0.0.1:{free_port()}"
    tab = create_engine(EngineSpec(name="mtplx", base_url=url, model="specchat-demo"), TabPolicy(models=lambda: LISTED))
    tab.load(OPTIONS)
    try:
        assert tab.info().state == "ready"
    finally:
        tab.unload()
    operator = create_engine(EngineSpec(name="mtplx", base_url=url, model="org/Qwen3.5-9B-MTPLX"))
    operator.load(OPTIONS)
    operator.unload()
    (tab_argv, operator_argv) = started_argv(fake_mtplx)
    assert "--download" not in tab_argv and tab_argv[tab_argv.index("--host") + 1] == "127.0.0.1"
    assert "--download" in operator_argv


def test_a_tabs_mtplx_off_loopback_is_only_adopted(fake_mtplx):
    engine = create_engine(EngineSpec(name="mtplx", base_url=f"http://0.0.0.0:{free_port()}"),
                           TabPolicy(allow_remote=True))
    assert isinstance(engine, MtplxEngine)
    engine.load(OPTIONS)
    try:
        assert engine.info().state == "error" and "only on this machine's loopback" in engine.info().message
        assert started_argv(fake_mtplx) == []  # no daemon was started listening on every interface
    finally:
        engine.unload()


class BadGateway(BaseHTTPRequestHandler):
    """A proxy in front of a dead server: models listed, chat answered with a long HTML error page."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._send(200, b'{"object": "list", "data": [{"id": "m"}]}', "application/json")

    def do_POST(self):
        page = ("<html><head><style>body{color:red}</style><script>alert('x')</script></head><body>"
                "<h1>502 Bad Gateway</h1>\x00\x1b[31m" + "<p>upstream said no</p>" * 400 + "</body></html>")
        self._send(502, page.encode(), "text/html")

    def _send(self, status, data, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_an_upstream_error_body_is_shown_short_and_as_text():
    with serving(BadGateway) as url:
        engine = OpenAICompatEngine(url + "/v1")
        engine.load(OPTIONS)
        done, _ = run(engine)
        engine.unload()
    message = done.error_message
    assert done.error_code == "server_error" and "HTTP 502 (502 Bad Gateway" in message
    assert "upstream said no upstream said no" in message
    assert not any(c in message for c in "<>\x00\x1b") and "alert" not in message and "color" not in message
    assert len(message) < 500 and "\u2026" in message
