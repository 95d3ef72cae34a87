"""Stored conversations in headless Chromium against the server on the fake engine: the URL reopens a
conversation (mid-reply too), regenerate and edit make branches the arrows walk, the sidebar lists, searches,
renames and deletes with undo, export and import, and the layout keeps the message box at the bottom."""

import json
import re

import pytest
import requests

from engines.block_policy import block_label
from engines.fake import ANSWER, THINKING
from tests.support.browser import DESKTOP, PHONE, TABLET, done_count, painted, send

pytestmark = pytest.mark.browser

def stored(server, id: str) -> dict:
    return requests.get(f"{server.url}/api/conversations/{id}", timeout=5).json()


def url_id(page) -> str:
    found = re.search(r"[?&]c=([^&#]+)", page.url)
    assert found, page.url
    return found.group(1)


def test_reload_restores_the_conversation_named_in_the_url(open_page, fake_server):
    page = open_page()
    send(page, "first question")
    id = url_id(page)
    send(page, "second question", 2)
    page.wait_for_selector(f'#history-list a[aria-current="page"][href="/?c={id}"]')

    page.reload()
    done_count(page, 2)
    assert url_id(page) == id
    assert page.locator(".msg.user .bubble").all_inner_texts() == ["first question", "second question"]
    answers = page.locator(".msg.assistant .answer")
    assert all("Here is an answer with code" in text for text in answers.all_inner_texts())
    # Each reply says what produced it, from the stored settings: on block "auto", the block its stats say ran most.
    history = next(m for m in stored(fake_server, id)["messages"] if m["role"] == "assistant")["stats"]["block_history"]
    assert page.locator(".msg.assistant").first.locator('[data-stat="produced"]').inner_text() == \
        f"drafter on · block {block_label('auto', history)} · budget 512"

    # The next message continues the stored branch.
    send(page, "third question", 3)
    messages = stored(fake_server, id)["messages"]
    third = next(m for m in messages if m["content"] == "third question")
    assert third["parent"] == messages[3]["id"]
    page.wait_for_function("() => document.querySelectorAll('.msg.assistant .msg-actions:not([hidden])').length === 3")


def test_a_reload_mid_reply_follows_the_reply(open_page, fake_server):
    engine = fake_server.engine
    engine.holds = [4]
    page = open_page()
    page.fill("#prompt", "hello")
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant .thinking").wait_for()
    page.wait_for_function("() => location.search.includes('c=')")
    id = url_id(page)
    page.reload()
    page.wait_for_selector("#engine[data-state=ready]")
    page.wait_for_selector('.msg.assistant[data-state="streaming"]')
    assert page.locator("#stop").is_visible()
    engine.resume()
    done_count(page, 1)
    assert page.locator(".msg.assistant").count() == 1
    assert "Here is an answer with code" in page.locator(".msg.assistant .answer").inner_text()
    assert stored(fake_server, id)["messages"][1]["finish_reason"] == "stop"


def test_regenerate_and_edit_make_branches_that_the_arrows_navigate(open_page, fake_server):
    page = open_page()
    send(page, "first question")
    id = url_id(page)
    first_reply = page.locator(".msg.assistant").get_attribute("data-message")
    assert page.locator(".branch-nav").count() == 0

    page.get_by_role("button", name="Regenerate answer").click()
    page.wait_for_function("() => document.querySelector('.msg.assistant .branch-count')?.textContent === '2/2'")
    reply = page.locator(".msg.assistant")
    second_reply = reply.get_attribute("data-message")
    assert second_reply != first_reply
    assert page.locator(".msg.assistant").count() == 1

    page.get_by_role("button", name="Previous answer").click()
    page.wait_for_function(f"() => document.querySelector('.msg.assistant')?.dataset.message === '{first_reply}'")
    assert page.locator(".msg.assistant .branch-count").inner_text() == "1/2"
    assert stored(fake_server, id)["current"] == first_reply
    page.get_by_role("button", name="Next answer").click()
    page.wait_for_function(f"() => document.querySelector('.msg.assistant')?.dataset.message === '{second_reply}'")

    # Edit the question: a new branch beside it, the old kept.
    page.get_by_role("button", name="Edit message").click()
    page.get_by_label("Edited message").fill("changed question")
    page.get_by_role("button", name="Send edit").click()
    page.wait_for_function("() => document.querySelector('.msg.user .branch-count')?.textContent === '2/2'")
    assert page.locator(".msg.user .bubble").inner_text() == "changed question"
    done_count(page, 1)
    users = [m for m in stored(fake_server, id)["messages"] if m["role"] == "user"]
    assert [u["content"] for u in users] == ["first question", "changed question"]
    assert users[1]["parent"] is None

    page.get_by_role("button", name="Previous message").click()
    page.wait_for_function("() => document.querySelector('.msg.user .bubble')?.textContent === 'first question'")
    # That branch comes back down to its newest answer, with its own arrows.
    assert page.locator(".msg.assistant").get_attribute("data-message") == second_reply
    assert page.locator(".msg.assistant .branch-count").inner_text() == "2/2"
    page.reload()
    done_count(page, 1)
    assert page.locator(".msg.user .bubble").inner_text() == "first question"


def test_continue_goes_on_with_a_stopped_reply_in_the_same_message(open_page, fake_server):
    fake_server.engine.holds = [17]  # past the thinking (15 words), a few words into the answer
    page = open_page()
    page.fill("#prompt", "tell me")
    page.press("#prompt", "Enter")
    reply = page.locator(".msg.assistant")
    page.wait_for_function("() => document.querySelector('.msg.assistant .answer')?.textContent.trim() !== ''")
    page.click("#stop")
    page.wait_for_selector('.msg.assistant[data-finish="cancelled"]')
    id = url_id(page)
    message = reply.get_attribute("data-message")
    said = stored(fake_server, id)["messages"][1]["content"]
    assert said.strip() and ANSWER.startswith(said.strip()) and said.strip() != ANSWER
    proceed = page.get_by_role("button", name="Continue reply", exact=True)
    proceed.wait_for()
    stats_before = reply.locator(".stats").inner_text()

    proceed.click()
    page.wait_for_selector('.msg.assistant[data-finish="stop"] .msg-actions:not([hidden])')
    # The same message on screen, its answer now the whole of what the engine says, rendered once.
    assert page.locator(".msg.assistant").count() == 1
    assert reply.get_attribute("data-message") == message
    expected = page.evaluate("""async (source) => {
      const { MarkdownView } = await import("@app/markdown.js");
      const el = document.createElement("div");
      new MarkdownView(el).render(source);
      return el.textContent;
    }""", ANSWER)
    shown = reply.locator(".answer").evaluate("el => el.textContent")
    assert shown.split() == expected.split()  # the engine's words each end in a space
    assert reply.locator(".answer .code-block").count() == 1
    assert reply.locator(".thinking-body").text_content().strip() == THINKING.strip()  # folded: not inner_text
    assert reply.locator(".stats").inner_text() != stats_before
    assert reply.locator(".note").count() == 0  # "stopped" no longer holds
    assert proceed.count() == 0
    messages = stored(fake_server, id)["messages"]
    assert len(messages) == 2
    assert messages[1]["id"] == message
    assert messages[1]["content"].strip() == ANSWER
    assert messages[1]["finish_reason"] == "stop"


def test_the_sidebar_searches_renames_and_deletes_with_undo(open_page, fake_server):
    page = open_page()
    send(page, "alpha about weekdays")
    first = url_id(page)
    page.get_by_role("button", name="New chat").click()
    send(page, "beta about units")
    second = url_id(page)
    assert first != second
    links = page.locator("#history-list .history-link")
    page.wait_for_function("() => document.querySelectorAll('#history-list .history-link').length === 2")
    assert links.all_inner_texts() == ["beta about units", "alpha about weekdays"]  # newest first
    assert page.locator(".history-heading").all_text_contents() == ["Today"]

    page.fill("#history-search", "weekdays")
    page.wait_for_function("() => document.querySelectorAll('#history-list .history-link').length === 1")
    assert links.inner_text() == "alpha about weekdays"
    page.fill("#history-search", "")
    page.wait_for_function("() => document.querySelectorAll('#history-list .history-link').length === 2")

    # Opening one from the list draws it and names it in the URL.
    page.get_by_role("link", name="alpha about weekdays").click()
    page.wait_for_function(f"() => location.search === '?c={first}'")
    done_count(page, 1)
    assert page.locator(".msg.user .bubble").inner_text() == "alpha about weekdays"

    page.get_by_role("button", name="Rename “alpha about weekdays”").click()
    page.get_by_label("New title for “alpha about weekdays”").fill("Weekday sums")
    page.keyboard.press("Enter")
    page.get_by_role("link", name="Weekday sums").wait_for()
    assert stored(fake_server, first)["title"] == "Weekday sums"

    deletes = []
    page.on("request", lambda request: request.method == "DELETE" and deletes.append(request.url))
    page.get_by_role("button", name="Delete “beta about units”").click()
    page.wait_for_function("() => document.querySelectorAll('#history-list .history-link').length === 1")
    page.locator("#history-undo").get_by_role("button", name="Undo").click()
    page.wait_for_function("() => document.querySelectorAll('#history-list .history-link').length === 2")
    page.wait_for_timeout(6500)  # past the undo window: nothing was deleted, nor asked to be
    assert deletes == [] and stored(fake_server, second)["id"] == second

    # Deleting the open conversation leaves it for a new chat; it is gone once the undo runs out.
    page.get_by_role("button", name="Delete “Weekday sums”").click()
    page.wait_for_function("() => location.search === ''")
    assert page.locator(".msg").count() == 0
    page.wait_for_function("() => !document.querySelector('#history-undo').hidden")
    # The bar hides as the DELETE goes out; the server is asked once that request has been answered.
    deleted = lambda response: response.request.method == "DELETE" and first in response.url  # noqa: E731
    with page.expect_response(deleted, timeout=10_000) as answer:
        page.wait_for_function("() => document.querySelector('#history-undo').hidden", timeout=10_000)
    assert answer.value.ok
    assert requests.get(f"{fake_server.url}/api/conversations/{first}", timeout=5).status_code == 404


def test_days_group_by_the_readers_calendar(open_page):
    page = open_page()
    groups = page.evaluate("""async () => {
      const { groupOf } = await import("@app/history.js");
      const now = new Date(2025, 5, 15, 9, 0);
      const at = (d, h) => new Date(2025, 5, d, h, 30).toISOString();
      return [at(15, 0), at(14, 23), at(14, 0), at(8, 12), at(7, 12), at(1, 12)].map((t) => groupOf(t, now));
    }""")
    assert groups == ["Today", "Yesterday", "Yesterday", "Previous 7 days", "Older", "Older"]


def test_export_and_import_round_trip(open_page, fake_server, tmp_path):
    page = open_page()
    send(page, "keep this one")
    id = url_id(page)
    page.locator("#export-json:not([hidden])").wait_for()
    assert page.locator("#export-markdown").get_attribute("href") == \
        f"/api/conversations/{id}/export?format=markdown"
    with page.expect_download() as download:
        page.get_by_role("link", name="Export JSON").click()
    path = tmp_path / "export.json"
    download.value.save_as(path)
    assert json.loads(path.read_text())["format"] == "specchat.conversation"

    page.set_input_files("#import-file", str(path))
    page.wait_for_function(f"() => location.search.startsWith('?c=') && location.search !== '?c={id}'")
    done_count(page, 1)
    copy = url_id(page)
    assert [m["content"] for m in stored(fake_server, copy)["messages"]] == \
        [m["content"] for m in stored(fake_server, id)["messages"]]

    open_page.expected.append("status of 400")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    page.set_input_files("#import-file", str(bad))
    error = page.locator("#history-error")
    error.wait_for()
    assert error.inner_text().startswith("Could not import bad.json:")


def box(page, selector: str) -> dict:
    return page.locator(selector).bounding_box()


@pytest.mark.parametrize("size", [PHONE, TABLET, DESKTOP], ids=["phone", "tablet", "desktop"])
def test_the_message_box_stays_at_the_bottom(open_page, size):
    width, height = size
    page = open_page(size)
    toggle = page.locator("#settings-toggle")
    for _ in range(2):  # the pane as it starts, then the other way
        composer, log = box(page, "#composer"), box(page, "#log")
        assert abs(composer["y"] + composer["height"] - height) <= 1, (size, toggle.get_attribute("aria-expanded"))
        assert abs(log["y"] + log["height"] - composer["y"]) <= 1
        assert composer["x"] >= 0 and composer["x"] + composer["width"] <= width + 1
        if width >= 1100:
            # Beside the chat: the chat column narrows, the pane fills the height under the header.
            pane = box(page, "#settings-panel") if toggle.get_attribute("aria-expanded") == "true" else None
            if pane:
                assert composer["x"] + composer["width"] <= pane["x"] + 1
                assert abs(pane["y"] + pane["height"] - height) <= 1
        if toggle.get_attribute("aria-expanded") == "true" and width < 960:
            page.get_by_role("button", name="Close settings").click()  # the drawer covers its toggle
        else:
            toggle.click()
        painted(page)


@pytest.mark.parametrize("close", ["Escape", "scrim"])
def test_the_settings_drawer_on_a_phone_is_full_height_and_closes(open_page, close):
    width, height = PHONE
    page = open_page(PHONE)
    assert page.locator("#settings-panel").is_hidden()
    page.click("#settings-toggle")
    pane = box(page, "#settings-panel")
    assert pane["y"] == 0 and abs(pane["height"] - height) <= 1 and pane["x"] + pane["width"] <= width + 1
    if close == "Escape":
        page.keyboard.press("Escape")
    else:
        page.mouse.click(10, height // 2)  # on the scrim, left of the drawer
    page.locator("#settings-panel").wait_for(state="hidden")
    assert page.locator("#settings-toggle").get_attribute("aria-expanded") == "false"


def test_jump_to_latest_and_escape_stops_wherever_focus_is(open_page, fake_server):
    page = open_page((900, 560))
    for n in range(3):
        send(page, f"question {n}", n + 1)
    fake_server.engine.holds = [6]
    page.fill("#prompt", "one more")
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant >> nth=3").locator(".thinking").wait_for()
    jump = page.locator("#jump")
    assert jump.is_hidden()
    page.locator("#log").evaluate("log => log.scrollTo(0, 0)")
    jump.wait_for()
    jump.click()
    page.wait_for_function("() => (() => { const l = document.querySelector('#log');"
                           " return l.scrollHeight - l.scrollTop - l.clientHeight < 2; })()")
    jump.wait_for(state="hidden")

    page.focus("#history-search")
    page.keyboard.press("Escape")
    page.wait_for_selector('.msg.assistant[data-finish="cancelled"]')


def test_controls_are_named_for_what_they_act_on(open_page):
    page = open_page()
    send(page, "hello")
    assert page.get_by_role("log").count() == 1
    for name in ("Copy answer", "Copy code", "Copy message", "Regenerate answer", "Edit message"):
        assert page.get_by_role("button", name=name, exact=True).count() == 1, name
