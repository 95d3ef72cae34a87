"""The empty screen's example prompts in headless Chromium, against the real server on the demo model: they
come from the model's examples.json, a click sends one and the model answers it right, and they go once the
conversation has a message."""

import json

import pytest

from demo_model import DEFAULT_MODEL as DEMO
from tests.support.browser import painted, ready_page, set_setting
from tests.support.harness import ServerProcess

pytestmark = pytest.mark.browser

SHIPPED = json.loads((DEMO / "examples.json").read_text())


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    server = ServerProcess(["--model", str(DEMO)], tmp_path_factory.mktemp("data"))
    server.wait_ready()
    yield server
    server.stop()


@pytest.fixture
def page(browser, demo_server):
    yield from ready_page(browser, demo_server.url)


def test_the_empty_screen_offers_the_examples_and_a_click_sends_one(page):
    buttons = page.locator("#examples .example")
    buttons.first.wait_for()
    assert buttons.all_inner_texts() == [ex["text"] for ex in SHIPPED]
    thinks = [ex["text"] for ex in SHIPPED if ex["thinking"]]
    assert page.locator("#examples .example[data-thinking]").all_inner_texts() == thinks
    page.wait_for_function("() => [...document.querySelectorAll('#examples .example')].every((b) => !b.disabled)")

    # With thinking off, the examples that need it say so; with it on again, the note goes.
    note = page.locator("#examples .examples-note")
    if page.locator("#settings [name=reasoning_budget]").is_hidden():
        page.click("#settings-toggle")
    assert note.is_hidden()
    set_setting(page, "reasoning_budget", "0")
    note.wait_for()
    assert "thinking budget 0" in note.inner_text()
    set_setting(page, "reasoning_budget", "512")
    note.wait_for(state="hidden")

    # The longest reply: multi-digit arithmetic, worked out while thinking.
    example = next(ex for ex in SHIPPED if ex["thinking"] and "+" in ex["text"])
    page.locator("#examples .example", has_text=example["text"]).click()
    assert page.locator(".msg.user .bubble").all_inner_texts() == [example["text"]]
    page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=120_000)
    painted(page)
    reply = page.locator(".msg.assistant").last
    assert reply.locator(".thinking").count() == 1
    assert example["expect"] in reply.locator(".answer").inner_text()
    assert page.locator("#examples").is_hidden()

    page.click("#new-chat")
    buttons.first.wait_for()
    assert page.locator(".msg").count() == 0
    assert buttons.count() == len(SHIPPED)
