"""In Chromium on the fake engine with a short context: a reply whose conversation outgrew the context says how
many of the oldest turns the model did not see, live and after a reload."""

import pytest

from tests.support.browser import done_count, send


pytestmark = pytest.mark.browser


def test_a_reply_says_when_the_oldest_turns_were_left_out(open_page, fake_server):
    fake_server.engine.context_words = 60
    fake_server.host.update_settings({"reasoning_budget": 0, "max_tokens": 64})
    page = open_page()
    for count in range(1, 7):
        send(page, f"question {count}", count)
    notes = page.locator('.msg.assistant .note[data-kind="context"]')
    last = page.locator(".msg.assistant").last.locator('.note[data-kind="context"]')
    assert notes.count() >= 1 and page.locator(".msg.assistant").first.locator(".note").count() == 0
    text = last.inner_text()
    assert "oldest turns" in text and "context" in text
    # The tab may also measure the drafter-off speed after a reply (a turn of its own): the last chat is meant.
    last_chat = [turn for turn in fake_server.engine.turns if turn.id != "calibration"][-1]
    dropped = last_chat.messages[0].content.split()[-1]  # "question N": N−1 turns left out
    assert f"{int(dropped) - 1} oldest turns" in text

    page.reload()
    done_count(page, 6)
    assert page.locator('.msg.assistant .note[data-kind="context"]').count() == notes.count()
    assert page.locator(".msg.assistant").last.locator('.note[data-kind="context"]').inner_text() == text
