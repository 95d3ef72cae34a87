"""The chat page in headless Chromium against the real server on the tiny model."""

import os
import re

import pytest

from tests.support.browser import painted, ready_page, set_setting

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, mlx_server):
    yield from ready_page(browser, mlx_server.url)


def send(page, text: str):
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")
    reply = page.locator(".msg.assistant").last
    reply.wait_for()
    return reply


def test_thinking_streams_collapses_and_budget_zero_hides_it(page, fake_server):
    if page.locator("#settings [name=reasoning_budget]").is_hidden():
        page.click("#settings-toggle")
    set_setting(page, "max_tokens", "40")
    set_setting(page, "reasoning_budget", "400")

    # The stream pauses a few tokens into its thinking, so the page is seen mid-stream however slowly it is polled
    # (on a busy machine the whole thinking could otherwise end between two polls).
    fake_server.engine.holds = [5]
    reply = send(page, "hello there")
    thinking = reply.locator(".thinking")
    thinking.wait_for()
    # While it streams the block is open and counts tokens.
    page.wait_for_function(
        "() => { const d = document.querySelector('.msg.assistant:last-child .thinking');"
        " return d && d.open && /Thinking/.test(d.querySelector('summary').textContent); }"
    )
    fake_server.engine.resume()
    page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=120_000)
    painted(page)
    assert not thinking.evaluate("d => d.open")
    assert re.fullmatch(r"Thought for \d+(\.\d+)? s · 400 tokens", thinking.locator("summary").inner_text().strip())
    assert reply.locator(".answer").inner_text().strip()
    stats = reply.locator(".stats").inner_text()
    assert "TTFT" in stats and "tok/s" in stats and "accepted" in stats

    set_setting(page, "reasoning_budget", "0")
    second = send(page, "no thinking please")
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === 2",
                           timeout=120_000)
    painted(page)
    assert second.locator(".thinking").count() == 0
    assert second.locator(".answer").inner_text().strip()
    if os.environ.get("SPECCHAT_SCREENSHOT"):
        page.screenshot(path=os.environ["SPECCHAT_SCREENSHOT"], full_page=True)


def test_stop_button_stops_the_reply(page):
    if page.locator("#settings [name=reasoning_budget]").is_hidden():
        page.click("#settings-toggle")
    set_setting(page, "reasoning_budget", "20000")
    reply = send(page, "think for a long time")
    reply.locator(".thinking").wait_for()
    page.click("#stop")
    page.wait_for_selector('.msg.assistant[data-finish="cancelled"]', timeout=30_000)
    painted(page)
    assert "stopped" in reply.inner_text()
    page.fill("#prompt", "next question")
    assert page.locator("#send").is_enabled() and page.locator("#stop").is_hidden()


def test_a_dropped_socket_loses_no_answer(browser, fake_server):
    fake_server.engine.delay_s = 0.03
    page = browser.new_page()
    try:
        page.goto(fake_server.url + "/")
        page.wait_for_selector("#engine[data-state=ready]")
        page.fill("#prompt", "hello")
        page.press("#prompt", "Enter")
        page.locator(".msg.assistant .thinking").wait_for()
        dropped = set(fake_server.host._sessions)
        for session in dropped:  # the network drops mid-reply
            session._ws.close()
        page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=30_000)
        # The page did reconnect on a new socket, and resumed the same conversation.
        assert fake_server.host._sessions and fake_server.host._sessions.isdisjoint(dropped)
        reply = page.locator(".msg.assistant").last
        assert "Here is an answer with code" in reply.locator(".answer").inner_text()
        assert "Interrupted" not in reply.inner_text()
        assert "does not see the messages" not in page.locator("#log").inner_text()
        assert page.locator(".msg.assistant").count() == 1
    finally:
        page.close()
