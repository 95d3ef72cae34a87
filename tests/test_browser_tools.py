"""The settings pane's Tools section in headless Chromium, against the app with MCP servers from the data
folder's mcp.json: each server's state as it changes (starting, then ready with its tools; failed and why), and
the switches per server and per tool, saved on the server and shown again after a reload."""

from __future__ import annotations

import json
import sys

import pytest
import requests

from engines.fake import FakeEngine
from tests.support.browser import collect_errors, wait_ready
from tests.support.mcp_servers import FAILURE
from tests.support.servers import LiveServer
from webapp import ROOT

pytestmark = pytest.mark.browser


def stdio(name: str, *extra: str) -> dict:
    return {"command": sys.executable, "cwd": str(ROOT),
            "args": ["-m", "tests.support.mcp_servers", "--name", name, "--lifetime", "120", *extra]}


@pytest.fixture
def tools_server(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "mcp.json").write_text(json.dumps({"mcpServers": {
        "local": stdio("local"), "slow": stdio("slow", "--delay", "3"), "broken": stdio("broken", "--fail")}}))
    server = LiveServer(FakeEngine(delay_s=0.01), data)
    yield server
    server.stop()
    server.app.extensions["tools"].close()


def listed(server) -> dict:
    body = requests.get(f"{server.url}/api/tools", timeout=5).json()
    return {s["name"]: s for s in body["servers"]}


def state_of(page, server: str) -> str:
    return page.locator(f'.tools-server[data-server="{server}"] .tools-server-state').text_content()


def wait_state(page, server: str, text: str) -> None:
    page.wait_for_function(
        "([server, text]) => document.querySelector(`.tools-server[data-server=\"${server}\"] .tools-server-state`)"
        "?.textContent.startsWith(text)", arg=[server, text], timeout=30_000)


def test_the_tools_section_shows_each_server_and_switches_its_tools(browser, tools_server):
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    errors = []
    try:
        page = context.new_page()
        collect_errors(page, errors)
        page.goto(tools_server.url + "/")
        wait_ready(page)
        wait_state(page, "builtin", "ready · 2 tools")
        wait_state(page, "slow", "starting…")  # the page polls while a server starts …
        wait_state(page, "slow", "ready · 6 tools")  # … and shows it ready without a reload
        wait_state(page, "local", "ready · 6 tools")
        wait_state(page, "broken", "failed: ")
        assert FAILURE in state_of(page, "broken")
        assert page.locator('.tools-server[data-server="broken"] .tools-item').count() == 0

        clock = page.locator('.tools-server[data-server="builtin"] .tools-item[data-tool="clock"]')
        assert "time zone" in clock.locator(".hint").text_content()  # the tool's description
        clock.get_by_role("switch", name="clock").click()
        calculator = page.locator('.tools-server[data-server="builtin"] .tools-item[data-tool="calculator"]')
        calculator.get_by_role("switch", name="Run without asking").click()
        page.locator('.tools-server[data-server="local"] .tools-server-head').get_by_role("switch").click()
        page.wait_for_function("() => !document.querySelector('#tools-servers input:disabled')")
        servers = listed(tools_server)
        builtin = {t["name"]: t for t in servers["builtin"]["tools"]}
        assert builtin["clock"]["enabled"] is False and builtin["calculator"]["always_allow"] is True
        assert servers["local"]["enabled"] is False and servers["slow"]["enabled"] is True
        offered = {(t.server, t.name) for t in tools_server.app.extensions["tools"].available()}
        assert ("builtin", "calculator") in offered and ("builtin", "clock") not in offered
        assert not any(server == "local" for server, _ in offered) and ("slow", "echo") in offered

        page.reload()
        wait_ready(page)
        wait_state(page, "local", "ready · 6 tools")
        assert not clock.get_by_role("switch", name="clock").is_checked()
        assert calculator.get_by_role("switch", name="Run without asking").is_checked()
        local = page.locator('.tools-server[data-server="local"] .tools-server-head')
        assert not local.get_by_role("switch").is_checked()
        assert page.locator("#tools-error").is_hidden()
    finally:
        context.close()
    assert errors == []
