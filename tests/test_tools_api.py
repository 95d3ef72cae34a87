"""The Tools routes: GET /api/tools and the switches (PATCH /api/tools/<server>[/<tool>]), their errors in the
one error shape, a tab off loopback that tries to switch a tool on, the MCP servers file read at startup, and
the settings that bound calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engines.fake import FakeEngine
from tests.support.mcp_servers import FAILURE
from tests.support.harness import get_json
from tests.support.poll import wait_until
from webapp import ROOT, create_app

TOKEN = "t0k3n-for-the-tools-tests_0123"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
LAN = {"REMOTE_ADDR": "192.168.1.20"}


@pytest.fixture
def client(tmp_path):
    return create_app(FakeEngine(delay_s=0), data_dir=tmp_path).test_client()


def tool(body: dict, server: str, name: str) -> dict:
    listed = next(s for s in body["servers"] if s["name"] == server)
    return next(t for t in listed["tools"] if t["name"] == name)


def assert_error(response, status: int, code: str) -> str:
    body = response.get_json()
    assert response.status_code == status, body
    assert body["ok"] is False and body["error"]["code"] == code and body["error"]["message"]
    return body["error"]["message"]


def test_the_builtin_tools_are_listed_on(client):
    body = client.get("/api/tools").get_json()
    assert body["ok"] is True and body["config_error"] is None
    (builtin,) = body["servers"]
    assert {k: builtin[k] for k in ("name", "transport", "state", "error", "enabled")} == \
        {"name": "builtin", "transport": "builtin", "state": "ready", "error": None, "enabled": True}
    assert [t["name"] for t in builtin["tools"]] == ["calculator", "clock"]
    assert all(t["enabled"] and not t["always_allow"] and t["description"] for t in builtin["tools"])


def test_switches_change_and_persist(client, tmp_path):
    answer = client.patch("/api/tools/builtin/clock", json={"enabled": False})
    assert answer.status_code == 200 and answer.get_json()["tool"]["enabled"] is False
    assert client.patch("/api/tools/builtin/calculator", json={"always_allow": True}).get_json()["tool"] == \
        {"name": "calculator", "description": tool(client.get("/api/tools").get_json(), "builtin",
                                                   "calculator")["description"],
         "enabled": True, "always_allow": True}
    assert client.patch("/api/tools/builtin", json={"enabled": False}).get_json()["server"]["enabled"] is False
    box = client.application.extensions["tools"]
    assert box.available() == [] and box.always_allowed("builtin", "calculator")
    # A new app on the same data folder finds them as they were left.
    again = create_app(FakeEngine(delay_s=0), data_dir=tmp_path).test_client().get("/api/tools").get_json()
    assert again["servers"][0]["enabled"] is False
    assert tool(again, "builtin", "clock")["enabled"] is False
    assert tool(again, "builtin", "calculator")["always_allow"] is True
    assert client.patch("/api/tools/builtin", json={"enabled": True}).status_code == 200
    assert [t.name for t in box.available()] == ["calculator"]


def test_bad_switches_get_the_error_shape(client):
    assert "GET /api/tools" in assert_error(client.patch("/api/tools/nobody", json={"enabled": False}), 404,
                                            "unknown_server")
    assert "calculator, clock" in assert_error(
        client.patch("/api/tools/builtin/weather", json={"enabled": False}), 404, "unknown_tool")
    assert "enabled" in assert_error(client.patch("/api/tools/builtin", json={"enabled": "no"}), 400,
                                     "bad_tool_switch")
    assert "always_allow" in assert_error(client.patch("/api/tools/builtin", json={"always_allow": True}), 400,
                                          "bad_tool_switch")
    assert_error(client.patch("/api/tools/builtin/clock", json={"enabled": 1}), 400, "bad_tool_switch")
    assert_error(client.patch("/api/tools/builtin/clock", data="nope", content_type="application/json"), 400,
                 "bad_json")
    assert_error(client.post("/api/tools"), 405, "method_not_allowed")
    assert tool(client.get("/api/tools").get_json(), "builtin", "clock")["enabled"] is True  # nothing changed


def test_off_loopback_a_tab_can_switch_tools_off_but_not_on(tmp_path):
    app = create_app(FakeEngine(delay_s=0), data_dir=tmp_path, config={"ACCESS_TOKEN": TOKEN})
    remote = app.test_client()
    remote.environ_base.update(LAN)
    assert remote.get("/api/tools", headers=BEARER).status_code == 200
    off = remote.patch("/api/tools/builtin/clock", json={"enabled": False}, headers=BEARER)
    assert off.status_code == 200 and off.get_json()["tool"]["enabled"] is False
    message = assert_error(remote.patch("/api/tools/builtin/clock", json={"enabled": True}, headers=BEARER), 403,
                           "loopback_only")
    assert "only be switched off" in message and "machine specchat runs on" in message
    assert_error(remote.patch("/api/tools/builtin/calculator", json={"always_allow": True}, headers=BEARER), 403,
                 "loopback_only")
    assert remote.patch("/api/tools/builtin", json={"enabled": False}, headers=BEARER).status_code == 200
    assert_error(remote.patch("/api/tools/builtin", json={"enabled": True}, headers=BEARER), 403, "loopback_only")
    listed = remote.get("/api/tools", headers=BEARER).get_json()
    assert listed["servers"][0]["enabled"] is False and tool(listed, "builtin", "clock")["enabled"] is False
    assert tool(listed, "builtin", "calculator")["always_allow"] is False
    # Without the token nothing at all; on this machine, with it, a tool may be switched on again.
    assert_error(remote.patch("/api/tools/builtin", json={"enabled": False}), 401, "unauthorized")
    local = app.test_client()
    assert local.patch("/api/tools/builtin", json={"enabled": True}, headers=BEARER).status_code == 200
    assert local.patch("/api/tools/builtin/clock", json={"enabled": True}, headers=BEARER).status_code == 200


def test_a_bad_servers_file_is_an_error_saying_how_to_fix_it_and_the_app_starts(tmp_path):
    (tmp_path / "mcp.json").write_text("{not json")
    body = create_app(FakeEngine(delay_s=0), data_dir=tmp_path).test_client().get("/api/tools").get_json()
    assert "not valid JSON" in body["config_error"] and "restart specchat" in body["config_error"]
    assert [s["name"] for s in body["servers"]] == ["builtin"]
    (tmp_path / "mcp.json").write_text(json.dumps({"servers": {}}))
    body = create_app(FakeEngine(delay_s=0), data_dir=tmp_path).test_client().get("/api/tools").get_json()
    assert '"mcpServers"' in body["config_error"]
    missing = tmp_path / "elsewhere.json"
    app = create_app(FakeEngine(delay_s=0), data_dir=tmp_path, config={"MCP_CONFIG": missing})
    assert "--mcp-config" in app.test_client().get("/api/tools").get_json()["config_error"]


def test_servers_of_the_file_are_listed_as_they_start(tmp_path):
    server = {"command": sys.executable, "args": ["-m", "tests.support.mcp_servers", "--name", "local",
                                                  "--lifetime", "120"], "cwd": str(ROOT)}
    broken = {**server, "args": [*server["args"], "--fail"]}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"local": server, "broken": broken, "builtin": server}}))
    app = create_app(FakeEngine(delay_s=0), data_dir=tmp_path, config={"MCP_CONFIG": path})
    client = app.test_client()
    try:
        body = client.get("/api/tools").get_json()
        assert [s["name"] for s in body["servers"]] == ["builtin", "local", "broken"]
        assert "'builtin'" in body["config_error"] and "Rename" in body["config_error"]
        assert wait_until(lambda: all(s["state"] != "starting"
                                      for s in client.get("/api/tools").get_json()["servers"]), timeout=60)
        _, local, failed = client.get("/api/tools").get_json()["servers"]
        assert (local["state"], local["transport"], local["error"]) == ("ready", "stdio", None)
        assert "echo" in [t["name"] for t in local["tools"]]
        assert failed["state"] == "failed" and FAILURE in failed["error"]
        assert client.patch("/api/tools/local/echo", json={"enabled": False}).status_code == 200
        assert ("local", "echo") not in {(t.server, t.name) for t in app.extensions["tools"].available()}
    finally:
        app.extensions["tools"].close()


def test_the_tool_settings_have_their_defaults(client):
    values = client.get("/api/settings").get_json()["values"]
    assert {k: values[k] for k in ("tools", "max_tool_steps", "tool_timeout_s", "tool_result_chars")} == \
        {"tools": True, "max_tool_steps": 8, "tool_timeout_s": 60, "tool_result_chars": 20000}
    refused = client.post("/api/settings", json={"tool_timeout_s": 0})
    assert_error(refused, 400, "invalid_settings")
    assert client.post("/api/settings", json={"tools": False}).get_json()["values"]["tools"] is False
    assert client.application.extensions["tools"].available() == []


def test_importing_the_app_imports_no_mcp():
    code = ("import sys, webapp; from engines.fake import FakeEngine; webapp.create_app(FakeEngine()); "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_command_line_reads_mcp_config_and_stops_its_servers_on_exit(start_server, tmp_path):
    pid_file = tmp_path / "server.pid"
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"local": {
        "command": sys.executable, "cwd": str(ROOT),
        "args": ["-m", "tests.support.mcp_servers", "--name", "local", "--pid-file", str(pid_file)]}}}))
    server = start_server("--engine", "fake", "--mcp-config", str(path))
    assert wait_until(lambda: get_json(server.url + "/api/tools")["servers"][-1]["state"] == "ready", timeout=60)
    local = get_json(server.url + "/api/tools")["servers"][-1]
    assert local["name"] == "local" and local["transport"] == "stdio" and local["tools"]
    pid = int(pid_file.read_text())
    assert running(pid)
    assert server.stop() == 0
    assert wait_until(lambda: not running(pid), timeout=10), "the MCP server outlived specchat"
    assert any("MCP servers stopped" in line for line in server.lines), "".join(server.lines)
