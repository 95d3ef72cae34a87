"""A reply's tool calls in headless Chromium, on the fake engine and the built-in tools (an MCP server for images
and a call that runs a while): each call is a block in the reply, in order with the thinking and the answer; it is
approved or denied in the block by keyboard, and the reply says it waits; "always" lets the tool's next call run
without asking; Stop ends a reply that waits; a reload shows a waiting call again, and a stored reply's calls in
order; long arguments keep the layout."""

from __future__ import annotations

import json
import re
import sys

import pytest
import requests

from engines.fake import FakeEngine
from tests.support.browser import OVERFLOWING, PHONE, collect_errors, done_count, evaluate, painted, wait_ready
from tests.support.servers import LiveServer
from webapp import ROOT

pytestmark = pytest.mark.browser

CALCULATOR = ("calculator", {"expression": "12.5% of 80"})
# The steps of the last reply (or of reply `n`) as the page shows them, in order.
STEPS = """(n = -1) => Array.from(
  [...document.querySelectorAll('.msg.assistant')].at(n)
    .querySelectorAll(':scope > .thinking, :scope > .tool-call, :scope > .answer'),
  (el) => el.classList.contains('tool-call') ? 'call' : el.classList[0])"""


def ask(page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def waiting_block(page):
    """The block of the call that waits for approval (the latest), found by its call id once it shows."""
    waiting = page.locator('.msg.assistant .tool-call[data-state="waiting"]').last
    waiting.wait_for()
    painted(page)
    return page.locator(f'.tool-call[data-call="{waiting.get_attribute("data-call")}"]')


def focused(page) -> str:
    return page.evaluate("() => document.activeElement?.textContent ?? ''")


def approvals(tab) -> list[dict]:
    return [f for f in tab.sent if f.get("type") == "tool_approval"]


def reload(tab) -> None:
    tab.page.reload()
    wait_ready(tab.page)


def test_a_call_approved_by_keyboard_runs_and_the_answer_follows_with_its_result(tab):
    tab.server.engine.tool_calls = [CALCULATOR]
    tab.open()
    page = tab.page
    ask(page, "what is 12.5% of 80?")
    block = waiting_block(page)
    reply = page.locator(".msg.assistant")
    assert page.evaluate(STEPS) == ["thinking", "call"]
    assert block.locator(".tool-call-name").text_content() == "calculator"
    assert block.locator(".tool-call-server").text_content() == "builtin"
    assert block.locator(".tool-call-state").text_content() == "waiting for your approval"
    assert block.locator(".tool-call-args").text_content() == json.dumps(CALCULATOR[1], indent=2)
    assert block.evaluate("el => el.open")
    # The reply says it waits, and that it is not stuck.
    waits = reply.locator('[data-stat="approval"]')
    assert waits.text_content() == "Waiting for your approval to run calculator: the reply goes on once you choose"
    assert reply.get_attribute("data-state") == "streaming"

    # Focus is on the first choice; Escape neither decides nor stops the reply, and gives the focus back.
    assert focused(page) == "Allow once"
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.activeElement?.id === 'prompt'")
    painted(page)
    assert reply.get_attribute("data-state") == "streaming" and approvals(tab) == []
    assert block.get_by_role("button", name="Allow once").is_visible()

    block.get_by_role("button", name="Allow once").focus()
    page.keyboard.press("Enter")
    page.wait_for_selector('.msg.assistant[data-finish="stop"]')
    painted(page)
    call = tab.of_type("tool_call")[0]["call"]
    assert approvals(tab) == [{"type": "tool_approval", "call": call, "decision": "once"}]
    assert page.evaluate(STEPS) == ["thinking", "call", "thinking", "answer"]
    assert block.get_attribute("data-state") == "done"
    assert re.fullmatch(r"done in [\d.,]+ (ms|s)", block.locator(".tool-call-state").text_content())
    assert block.locator(".tool-call-approval").is_hidden()
    assert not block.evaluate("el => el.open")  # finished, it folds away
    assert block.locator(".tool-call-text").text_content() == "10"
    assert "The tool said: 10" in reply.locator(".answer").text_content()
    assert reply.locator('[data-stat="approval"]').count() == 0
    assert re.fullmatch(r"1 tool call, [\d.,]+ (ms|s)", reply.locator('[data-stat="tool_calls"]').text_content())
    labels = reply.locator(".thinking-label").all_text_contents()
    assert len(labels) == 2 and all(re.fullmatch(r"Thought for [\d.]+ s", label) for label in labels)


def test_always_lets_the_tools_next_call_run_without_asking(tab):
    tab.server.engine.tool_calls = [CALCULATOR]
    tab.open()
    page = tab.page
    ask(page, "first")
    waiting_block(page)
    assert focused(page) == "Allow once"
    page.keyboard.press("Tab")
    assert focused(page) == "Always allow this tool"
    page.keyboard.press("Space")
    done_count(page, 1)
    assert [f["decision"] for f in approvals(tab)] == ["always"]
    tools = requests.get(f"{tab.server.url}/api/tools", timeout=5).json()["servers"]
    calculator = next(t for s in tools if s["name"] == "builtin" for t in s["tools"] if t["name"] == "calculator")
    assert calculator["always_allow"] is True

    seen = len(tab.frames)
    ask(page, "second")
    done_count(page, 2)
    states = [f["state"] for f in tab.frames[seen:] if f["type"] == "tool_call"]
    assert states == ["running", "done"]
    second = page.locator(".msg.assistant").nth(1)
    assert second.locator(".tool-call").get_attribute("data-state") == "done"
    assert second.locator(".tool-call-approval").is_hidden()
    assert "The tool said: 10" in second.locator(".answer").text_content()
    assert len(approvals(tab)) == 1


def test_a_denied_call_shows_denied_and_the_reply_goes_on(tab):
    tab.server.engine.tool_calls = [CALCULATOR]
    tab.open()
    page = tab.page
    ask(page, "what is 12.5% of 80?")
    block = waiting_block(page)
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert focused(page) == "Deny"
    page.keyboard.press("Enter")
    page.wait_for_selector('.msg.assistant[data-finish="stop"]')
    painted(page)
    assert [f["decision"] for f in approvals(tab)] == ["deny"]
    assert block.get_attribute("data-state") == "denied"
    assert block.locator(".tool-call-state").text_content() == "denied"
    assert page.evaluate(STEPS) == ["thinking", "call", "thinking", "answer"]
    assert "The tool said: The user denied this call." in page.locator(".msg.assistant .answer").text_content()


def test_stop_while_a_call_waits_ends_the_reply(tab):
    tab.server.engine.tool_calls = [CALCULATOR]
    tab.open()
    page = tab.page
    ask(page, "what is 12.5% of 80?")
    block = waiting_block(page)
    page.click("#stop")
    page.wait_for_selector('.msg.assistant[data-finish="cancelled"]')
    painted(page)
    assert approvals(tab) == []
    assert block.get_attribute("data-state") == "failed"
    assert block.locator(".tool-call-state").text_content() == "failed: The reply was stopped."
    assert block.locator(".tool-call-approval").is_hidden()
    assert page.locator('.msg.assistant [data-stat="approval"]').count() == 0
    assert page.evaluate(STEPS) == ["thinking", "call"]
    assert page.locator("#send").is_visible()


def test_a_reload_while_a_call_waits_shows_it_waiting_again(tab):
    tab.server.engine.tool_calls = [CALCULATOR]
    tab.open()
    page = tab.page
    ask(page, "what is 12.5% of 80?")
    waiting_block(page)
    page.wait_for_function("() => location.search.includes('c=')")
    reload(tab)
    block = waiting_block(page)
    assert page.evaluate(STEPS) == ["thinking", "call"]
    assert page.locator(".msg.assistant .tool-call").count() == 1
    assert focused(page) == "Allow once"
    page.keyboard.press("Enter")
    page.wait_for_selector('.msg.assistant[data-finish="stop"]')
    painted(page)
    assert block.get_attribute("data-state") == "done"
    assert "The tool said: 10" in page.locator(".msg.assistant .answer").text_content()


def test_a_stored_reply_with_a_call_is_drawn_in_order_after_a_reload(tab):
    tab.server.engine.tool_calls = [CALCULATOR]
    tab.open()
    page = tab.page
    ask(page, "what is 12.5% of 80?")
    waiting_block(page).get_by_role("button", name="Allow once").click()
    done_count(page, 1)
    reply = page.locator(".msg.assistant").first
    thinking = reply.locator(".thinking-body").all_text_contents()
    answer = reply.locator(".answer").text_content()
    tool_calls = reply.locator('[data-stat="tool_calls"]').text_content()
    # A later reply, so that the reload draws this one from the store rather than from the latest reply's frames.
    tab.server.engine.tool_calls = []
    ask(page, "thanks")
    done_count(page, 2)

    reload(tab)
    done_count(page, 2)
    assert page.evaluate(STEPS, 0) == ["thinking", "call", "thinking", "answer"]
    assert reply.locator(".thinking-body").all_text_contents() == thinking
    assert reply.locator(".answer").text_content() == answer
    block = reply.locator(".tool-call")
    assert block.get_attribute("data-state") == "done"
    assert re.fullmatch(r"done in [\d.,]+ (ms|s)", block.locator(".tool-call-state").text_content())
    assert block.locator(".tool-call-args").text_content() == json.dumps(CALCULATOR[1], indent=2)
    assert block.locator(".tool-call-text").text_content() == "10"
    assert not block.evaluate("el => el.open")
    # Only the reply's total thinking time is stored: the blocks do not make one up each.
    assert reply.locator(".thinking-label").all_text_contents() == ["Thought", "Thought"]
    assert reply.locator('[data-stat="tool_calls"]').text_content() == tool_calls


def test_long_arguments_and_results_keep_the_layout_on_a_phone(open_page, fake_server):
    digits = "7" * 600
    fake_server.engine.tool_calls = [("calculator", {"expression": digits})]
    page = open_page(PHONE)
    ask(page, "a long number")
    block = waiting_block(page)
    assert page.evaluate(OVERFLOWING) == []
    block.get_by_role("button", name="Allow once").click()
    done_count(page, 1)
    block.locator("summary").click()
    painted(page)
    assert block.locator(".tool-call-text").text_content() == digits
    assert page.evaluate(OVERFLOWING) == []
    width = page.locator(".msg.assistant").evaluate("el => el.getBoundingClientRect().width")
    assert block.evaluate("el => el.getBoundingClientRect().width") <= width


STATS_CHIPS = """(m, stats) => {
  const el = document.createElement('div');
  m.renderStats(el, stats, false);
  return Object.fromEntries([...el.children].map((chip) => [chip.dataset.stat, chip.textContent]));
}"""


def test_the_stats_line_counts_the_calls_and_json_results_keep_every_digit(tab):
    tab.open()
    chips = evaluate(tab, "stats.js", STATS_CHIPS, {"tokens": 40, "tool_calls": 2, "tool_ms": 1234.5,
                                                     "tool_acceptance": 0.875})
    assert chips["tool_calls"] == "2 tool calls, 1.2 s"
    assert chips["tool_acceptance"] == "88% accepted in tool calls"
    chips = evaluate(tab, "stats.js", STATS_CHIPS, {"tokens": 40, "tool_calls": 1, "tool_ms": 12.3,
                                                     "tool_acceptance": None})
    assert chips["tool_calls"] == "1 tool call, 12 ms" and "tool_acceptance" not in chips
    chips = evaluate(tab, "stats.js", STATS_CHIPS, {"tokens": 40, "tool_calls": 0, "tool_ms": 0,
                                                     "tool_acceptance": None})
    assert "tool_calls" not in chips
    pretty = evaluate(tab, "tool-call.js", "(m, text) => m.prettyJson(text)",
                      '{"n":12345678901234567890,"s":"a,b:{c}","e":[],"l":[1,{"x":null}]}')
    assert pretty == ('{\n  "n": 12345678901234567890,\n  "s": "a,b:{c}",\n  "e": [],\n  "l": [\n    1,\n    {\n'
                      '      "x": null\n    }\n  ]\n}')
    assert evaluate(tab, "tool-call.js", "(m, text) => m.prettyJson(text)", "12 apples {") == "12 apples {"


@pytest.fixture
def mcp_server(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    server = {"command": sys.executable, "cwd": str(ROOT),
              "args": ["-m", "tests.support.mcp_servers", "--name", "local", "--lifetime", "120"]}
    (data / "mcp.json").write_text(json.dumps({"mcpServers": {"local": server}}))
    live = LiveServer(FakeEngine(delay_s=0.01), data)
    yield live
    live.stop()
    live.app.extensions["tools"].close()


def test_a_running_call_shows_its_time_and_an_image_result_is_shown(browser, mcp_server):
    mcp_server.engine.tool_calls = [("hang", {"seconds": 1.5}), ("image", {})]
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    errors = []
    try:
        page = context.new_page()
        collect_errors(page, errors)
        page.goto(mcp_server.url + "/")
        wait_ready(page)
        page.wait_for_function("() => document.querySelector('.tools-server[data-server=\"local\"]')"
                               "?.dataset.state === 'ready'", timeout=30_000)
        ask(page, "hang, then draw")
        waiting_block(page)
        assert focused(page) == "Allow once"
        page.keyboard.press("Enter")
        page.wait_for_selector('.tool-call[data-state="running"]')
        # The clock ticks while the call runs.
        shown = page.evaluate("""async () => {
          const state = document.querySelector('.tool-call[data-state="running"] .tool-call-state');
          const first = state.textContent;
          await new Promise((later) => setTimeout(later, 400));
          return [first, state.textContent];
        }""")
        assert all(re.fullmatch(r"running… [\d.]+ s", text) for text in shown) and shown[0] != shown[1], shown
        # The next call waits in its own block, after the first, and takes the focus.
        image = waiting_block(page)
        assert page.locator(".tool-call").count() == 2
        assert focused(page) == "Allow once"
        page.keyboard.press("Enter")
        done_count(page, 1)
        assert page.evaluate(STEPS) == ["thinking", "call", "call", "thinking", "answer"]
        assert image.get_attribute("data-state") == "done"
        img = image.locator("img.tool-call-image")
        assert img.get_attribute("src").startswith("data:image/png;base64,")
        assert img.evaluate("el => el.complete && el.naturalWidth") == 1  # the CSP lets it load
    finally:
        context.close()
    assert errors == []
