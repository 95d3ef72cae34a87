"""MCP servers through the ToolBox, against real servers written with the SDK (tests/support/mcp_servers.py): over
stdio and streamable HTTP, two with a tool of the same name, one that hangs, one that crashes mid-call, ones that
cannot start; calls with bad arguments, a cancel during a call, the timeout, results cut to length."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from engines.options import GenerationOptions
from tests.support.mcp_servers import FAILURE
from tests.support.poll import wait_until
from webapp import ROOT
from webapp.tools import mcp_client
from webapp.tools.config import read_config
from webapp.tools.switches import SwitchStore
from webapp.tools.toolbox import ToolBox

SERVER = [sys.executable, "-m", "tests.support.mcp_servers", "--lifetime", "300"]


def stdio(name: str, *extra: str) -> dict:
    return {"command": SERVER[0], "args": [*SERVER[1:], "--name", name, *extra], "cwd": str(ROOT)}


class Options:
    """The live settings a ToolBox reads, changed by a test."""

    def __init__(self):
        self.current = GenerationOptions()

    def set(self, **values) -> None:
        self.current = self.current.updated(values)


def started(box: ToolBox, timeout: float = 60) -> ToolBox:
    box.start()
    assert wait_until(lambda: all(s["state"] != "starting" for s in box.listing()["servers"]), timeout=timeout), \
        "MCP servers still starting"
    return box


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    # The server picks its own port and names it once it listens: a port chosen here could be taken by another
    # test's server before this one bound it.
    port_file = tmp_path_factory.mktemp("web") / "port"
    process = subprocess.Popen([*SERVER, "--name", "web", "--http", "0", "--port-file", str(port_file)], cwd=ROOT)
    assert wait_until(port_file.exists, timeout=30), "the HTTP MCP server did not start"
    yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def box(http_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tools")
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "one": stdio("one"), "two": stdio("two"), "crashy": stdio("crashy"),
        "web": {"url": http_server, "headers": {"X-Test": "yes"}},
        "broken": stdio("broken", "--fail"),
        "missing": {"command": str(folder / "no-such-program")},
        "typo": {"command": "x", "arg": []},
    }}))
    options = Options()
    tool_box = started(ToolBox(lambda: options.current, SwitchStore(folder), read_config(path)))
    tool_box.options = options
    yield tool_box
    tool_box.close()


def server(box: ToolBox, name: str) -> dict:
    return next(s for s in box.listing()["servers"] if s["name"] == name)


def test_servers_over_stdio_and_http_list_their_tools(box):
    for name, transport in (("one", "stdio"), ("two", "stdio"), ("web", "http")):
        listed = server(box, name)
        assert (listed["state"], listed["transport"], listed["error"]) == ("ready", transport, None)
        assert {"echo", "add", "hang", "crash", "image", "big"} == {t["name"] for t in listed["tools"]}
    offered = {(t.server, t.name) for t in box.available()}
    assert {("one", "echo"), ("two", "echo"), ("web", "echo"), ("builtin", "calculator")} <= offered
    add = next(t for t in box.available() if (t.server, t.name) == ("web", "add"))
    assert add.function()["function"]["parameters"]["properties"]["a"]["type"] == "integer"


def test_a_call_goes_to_the_server_that_offered_the_tool(box):
    for name in ("one", "two", "web"):
        result = box.call(name, "echo", {"text": "hi"})
        assert result.ok and result.text() == f"{name}: hi"
        assert result.ms > 0


def test_servers_that_cannot_start_say_why(box):
    broken = server(box, "broken")
    assert broken["state"] == "failed" and FAILURE in broken["error"] and broken["tools"] == []
    missing = server(box, "missing")
    assert missing["state"] == "failed" and "no such program" in missing["error"]
    typo = server(box, "typo")
    assert typo["state"] == "failed" and "arg" in typo["error"] and "MCP servers file" in typo["error"]
    result = box.call("broken", "echo", {"text": "x"})
    assert not result.ok and "could not be started" in result.text() and FAILURE in result.text()
    assert "broken" not in {t.server for t in box.available()}


def test_bad_calls_are_failed_results_not_exceptions(box):
    unknown = box.call("one", "nope", {})
    assert not unknown.ok and "no tool 'nope'" in unknown.text() and "echo" in unknown.text()
    wrong = box.call("one", "add", {"a": "three", "b": 2})
    assert not wrong.ok and "valid integer" in wrong.text()
    assert box.call("one", "add", {"a": 3, "b": 2}).text() == "5"
    not_a_dict = box.call("one", "add", "[1, 2]")
    assert not not_a_dict.ok and "JSON object" in not_a_dict.text()
    nobody = box.call("nobody", "echo", {"text": "x"})
    assert not nobody.ok and "no MCP server 'nobody'" in nobody.text()


def test_a_hanging_call_times_out_and_the_server_goes_on(box):
    began = time.perf_counter()
    result = box.call("web", "hang", {"seconds": 60}, timeout_s=0.5)
    assert time.perf_counter() - began < 5
    assert not result.ok and "took longer than 0.5 s" in result.text() and "cancelled" in result.text()
    assert box.call("web", "echo", {"text": "still here"}).text() == "web: still here"


def test_the_timeout_setting_applies_when_the_call_names_none(box):
    box.options.set(tool_timeout_s=1)
    try:
        began = time.perf_counter()
        result = box.call("one", "hang", {"seconds": 60})
        assert time.perf_counter() - began < 5 and not result.ok and "took longer than 1 s" in result.text()
    finally:
        box.options.set(tool_timeout_s=60)


def test_cancel_ends_a_running_call_at_once(box):
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    began = time.perf_counter()
    result = box.call("one", "hang", {"seconds": 60}, cancel=cancel)
    assert time.perf_counter() - began < 1.5
    assert not result.ok and "stopped" in result.text()
    assert box.call("one", "echo", {"text": "after"}).text() == "one: after"


def test_a_server_that_dies_fails_its_call_and_is_started_again_on_its_next_use(box):
    died = box.call("crashy", "crash", {})
    assert not died.ok and "stopped during the call" in died.text()
    listed = server(box, "crashy")
    assert listed["state"] == "failed" and "started again on its next use" in listed["error"]
    again = box.call("crashy", "echo", {"text": "back"})
    assert again.ok and again.text() == "crashy: back"
    assert server(box, "crashy")["state"] == "ready"


def test_images_come_back_as_image_parts(box):
    result = box.call("web", "image", {})
    assert result.ok and result.content[0]["type"] == "image" and result.content[0]["mime_type"] == "image/png"
    assert result.content[0]["data"].startswith("iVBOR")


def test_long_results_are_cut_with_a_note(box):
    box.options.set(tool_result_chars=1000)
    try:
        result = box.call("two", "big", {"n": 5000})
    finally:
        box.options.set(tool_result_chars=20000)
    assert result.ok and result.content[0]["text"] == "x" * 1000
    assert "5,000 characters" in result.content[1]["text"] and "tool_result_chars" in result.content[1]["text"]
    assert box.call("two", "big", {"n": 5000}).content[0]["text"] == "x" * 5000


def test_switched_off_tools_are_neither_offered_nor_called(box):
    box.switches.set_tool("two", "echo", enabled=False)
    try:
        assert ("two", "echo") not in {(t.server, t.name) for t in box.available()}
        assert ("one", "echo") in {(t.server, t.name) for t in box.available()}
        refused = box.call("two", "echo", {"text": "x"})
        assert not refused.ok and "switched off" in refused.text()
    finally:
        box.switches.set_tool("two", "echo", enabled=True)
    box.options.set(tools=False)
    try:
        assert box.available() == []
        assert not box.call("one", "echo", {"text": "x"}).ok
    finally:
        box.options.set(tools=True)


def test_close_stops_every_server_in_bounded_time(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"one": stdio("one"), "two": stdio("two")}}))
    box = started(ToolBox(GenerationOptions, SwitchStore(tmp_path), read_config(path)))
    assert [s["state"] for s in box.listing()["servers"]] == ["ready", "ready", "ready"]
    began = time.perf_counter()
    box.close()
    assert time.perf_counter() - began < 10
    result = box.call("one", "echo", {"text": "x"})
    assert not result.ok and "shutting down" in result.text()


def test_a_server_that_never_answers_fails_its_start_in_bounded_time(tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_client, "START_TIMEOUT_S", 1.0)
    path = tmp_path / "mcp.json"
    # It reads what it is sent and never answers; it leaves when its input closes, as a stdio server does.
    mute = {"command": sys.executable, "args": ["-c", "import sys; print('thinking…', file=sys.stderr, "
                                                      "flush=True); sys.stdin.read()"]}
    path.write_text(json.dumps({"mcpServers": {"mute": mute}}))
    box = started(ToolBox(GenerationOptions, SwitchStore(tmp_path), read_config(path)), timeout=10)
    try:
        listed = server(box, "mute")
        assert listed["state"] == "failed" and "did not answer within 1 s" in listed["error"]
        assert "thinking…" in listed["error"]  # its last words on stderr
        began = time.perf_counter()
        result = box.call("mute", "echo", {"text": "x"}, timeout_s=30)
        assert time.perf_counter() - began < 5 and not result.ok and "could not be started" in result.text()
    finally:
        box.close()


def test_a_start_that_meets_an_interpreter_fault_is_tried_again(tmp_path, monkeypatch):
    """CPython 3.11 can fail building a syntax tree while another thread builds one (SystemError); such a start is
    the interpreter's fault, not the server's, and is tried once more. A second fault fails the start."""
    opened = []
    real_open = mcp_client.Connection.open_client

    async def open_failing(connection, stack, errlog, faults):
        opened.append(connection.name)
        if opened.count(connection.name) <= faults[connection.name]:
            raise SystemError("AST constructor recursion depth mismatch (before=3, after=5)")
        return await real_open(connection, stack, errlog)

    faults = {"once": 1, "twice": 2}
    monkeypatch.setattr(mcp_client.Connection, "open_client",
                        lambda connection, stack, errlog: open_failing(connection, stack, errlog, faults))
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"once": stdio("once"), "twice": stdio("twice")}}))
    box = started(ToolBox(GenerationOptions, SwitchStore(tmp_path), read_config(path)))
    try:
        assert server(box, "once")["state"] == "ready" and opened.count("once") == 2
        twice = server(box, "twice")
        assert twice["state"] == "failed" and "SystemError" in twice["error"] and opened.count("twice") == 2
        assert box.call("once", "echo", {"text": "x"}).ok
    finally:
        box.close()
