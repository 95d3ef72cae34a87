"""The layout holds in headless Chromium: long chat titles and first messages at phone, tablet and desktop
sizes with the panes open and closed, nothing moving while the page loads, race lane headers on one line
beside both panes, acceptance coloured by its value, chips inside their column and the model named by its
folder in the header."""

import os
from pathlib import Path

import pytest
import requests

from tests.support.browser import DESKTOP, OVERFLOWING, PHONE, TABLET, painted, ready_page, set_setting, start_race
from webapp.conversations.store import title_of

pytestmark = pytest.mark.browser

SIZES = pytest.mark.parametrize("size", [PHONE, TABLET, DESKTOP], ids=["phone", "tablet", "desktop"])
CHAT_MIN_PX = 320  # the chat column's least width beside the panes on a desktop-sized window

# A natural first question (spaces to break at) and one unbreakable run, each cut to the length asked.
WORDS = "How much faster is speculative decoding with the drafter on for a long answer about units "
RUN = "https://example.com/" + "a" * 1000
RENAMED = "Renamed after the first reply: units, sums and letter counts in one long chat "


def text(length: int, source: str = WORDS) -> str:
    return (source * (length // len(source) + 1))[: length - 1] + "?"


def seed(server, title: str | None, first: str) -> str:
    """A stored conversation (an import, as the sidebar's Import does): its title, first message and a reply."""
    when = "2026-12-01T10:00:00.000Z"
    body = {"format": "specchat.conversation", "version": 1, "title": title, "messages": [
        {"id": "q", "parent": None, "role": "user", "content": first, "created_at": when},
        {"id": "a", "parent": "q", "role": "assistant", "content": "An answer.", "finish_reason": "stop",
         "created_at": when}]}
    reply = requests.post(f"{server.url}/api/conversations/import", json=body, timeout=5)
    assert reply.status_code == 201, reply.text
    return reply.json()["id"]


def screenshot(page, label: str) -> None:
    """With SPECCHAT_SCREENSHOT=/tmp/chat.png, save /tmp/chat-<label>.png to look at."""
    if os.environ.get("SPECCHAT_SCREENSHOT"):
        path = Path(os.environ["SPECCHAT_SCREENSHOT"])
        page.screenshot(path=str(path.with_name(f"{path.stem}-{label}.png")))


def box(page, selector: str) -> dict | None:
    return page.locator(selector).first.bounding_box()


def check_layout(page, size, title: str, label: str) -> None:
    """Whatever panes are open: the chat keeps its width, nothing overflows, the title is cut but whole."""
    width, height = size
    screenshot(page, label)
    assert page.evaluate(OVERFLOWING) == [], label
    chat, composer = box(page, ".chat"), box(page, "#composer")
    assert composer["x"] >= chat["x"] - 1 and composer["x"] + composer["width"] <= chat["x"] + chat["width"] + 1
    if width >= TABLET[0]:
        assert chat["width"] >= CHAT_MIN_PX, label
    history = box(page, "#history")
    if history:
        assert history["width"] <= 300, label  # fixed, whatever the titles
        if width > 1100:
            assert abs(history["width"] - 264) <= 1 and chat["x"] >= history["x"] + history["width"] - 1, label
        link = page.locator("#history-list .history-link[aria-current=page]")
        link_box = link.bounding_box()
        assert link_box["x"] + link_box["width"] <= history["x"] + history["width"] + 1
        # Cut on screen by CSS only: the whole title is the link's text (what a screen reader reads) and its
        # title (what hovering shows).
        assert link.evaluate("a => a.scrollWidth > a.clientWidth") and link.get_attribute("title") == title
        assert page.get_by_role("link", name=title, exact=True).count() == 1
    pane = box(page, "#settings-panel")
    if pane and width > 960:
        assert composer["x"] + composer["width"] <= pane["x"] + 1 and abs(pane["x"] + pane["width"] - width) <= 1
    bubble = box(page, ".msg.user .bubble")
    log = box(page, "#log")
    assert bubble["x"] >= log["x"] and bubble["x"] + bubble["width"] <= log["x"] + log["width"] + 1


def pane_states(page, width: int):
    """Walk the panes through open and closed, yielding a label for each state."""
    history, settings = page.locator("#history-toggle"), page.locator("#settings-toggle")
    opened = lambda toggle: toggle.get_attribute("aria-expanded") == "true"  # noqa: E731

    def show(toggle, want: bool, close_label: str):
        if opened(toggle) == want:
            return
        if not want and width <= 1100 and page.locator("#scrim").is_visible():
            page.get_by_role("button", name=close_label).click()  # the drawer covers the header
        else:
            toggle.click()
        painted(page)

    combos = [(True, True), (False, False), (True, False), (False, True)] if width > 1100 else \
        [(False, False), (True, False), (False, True)]  # a narrow window has one drawer open at a time
    for want_history, want_settings in combos:
        show(history, False, "Close the conversation list")
        show(settings, False, "Close settings")
        show(history, want_history, "Close the conversation list")
        show(settings, want_settings, "Close settings")
        assert opened(history) == want_history and opened(settings) == want_settings
        yield f"{'history' if want_history else 'no-history'}-{'settings' if want_settings else 'no-settings'}"


@SIZES
@pytest.mark.parametrize("length", [80, 200])
def test_long_titles_and_first_messages_keep_the_layout(open_page, fake_server, size, length):
    natural = seed(fake_server, None, text(length))  # titled by its first message, as a sent one is
    renamed = seed(fake_server, text(length, RENAMED), text(length, RUN))
    for id, title in ((natural, title_of(text(length))), (renamed, text(length, RENAMED))):
        page = open_page(size, f"/?c={id}")
        page.locator(".msg.user .bubble").wait_for()
        page.wait_for_selector("#history-list .history-link[aria-current=page]", state="attached")
        for state in pane_states(page, size[0]):
            check_layout(page, size, title, f"{size[0]}-{length}-{'renamed' if id == renamed else 'first'}-{state}")


def test_a_long_first_question_and_rename_keep_the_chat_column(open_page):
    page = open_page(DESKTOP)
    question = text(80)
    page.fill("#prompt", question)
    page.press("#prompt", "Enter")
    page.wait_for_selector('.msg.assistant[data-state="done"]')
    page.wait_for_selector("#history-list .history-link[aria-current=page]")
    check_layout(page, DESKTOP, question, "sent-80")

    long = text(200)
    page.locator("#history-list .history-item").first.hover()
    page.get_by_role("button", name=f"Rename “{question}”").click()
    page.fill(".history-rename", long)
    page.press(".history-rename", "Enter")
    page.wait_for_selector(f'#history-list .history-link[title="{long}"]')
    check_layout(page, DESKTOP, long, "renamed-200")


# Every layout shift since the page began (buffered), not caused by input, summed: the page's CLS.
LAYOUT_SHIFT = """() => new Promise((resolve) => {
  let total = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) if (!entry.hadRecentInput) total += entry.value;
  }).observe({ type: 'layout-shift', buffered: true });
  setTimeout(() => resolve(total), 200);
})"""


@SIZES
def test_the_page_loading_moves_nothing(open_page, fake_server, size):
    for n in range(12):
        seed(fake_server, text(200 if n % 2 else 80), text(80))
    id = seed(fake_server, text(200, RUN), text(200))
    page = open_page(size, f"/?c={id}")
    page.wait_for_selector("#history-list .history-link", state="attached")
    page.locator(".msg.user .bubble").wait_for()
    page.wait_for_timeout(500)  # anything that still arrives late would shift within this
    screenshot(page, f"load-{size[0]}")
    assert page.evaluate(LAYOUT_SHIFT) < 0.05


@SIZES
def test_the_chat_keeps_its_place_before_the_panes_are_parsed(open_page, size):
    """A slow first paint can show the page before the end of its HTML: the chat column then already has its
    final place, so the settings pane arriving after it moves nothing."""
    page = open_page(size)
    where = "() => { const r = document.querySelector('.messages').getBoundingClientRect(); return [r.x, r.width]; }"
    final = page.evaluate(where)
    page.evaluate("document.querySelector('#settings-panel').remove()")
    assert page.evaluate(where) == final


# Each lane header and each part of it no taller than one line of its text.
LANE_HEAD_LINES = """() => [...document.querySelectorAll('.lane-head')].map((head) => {
  const line = parseFloat(getComputedStyle(head).lineHeight);
  return Math.max(head.getBoundingClientRect().height, ...[...head.children].map((c) => c.getBoundingClientRect().height)) / line;
})"""


def test_race_lane_headers_stay_on_one_line_beside_both_panes(open_page, fake_server):
    engine = fake_server.engine
    engine.delay_s = 0.02
    fake_server.host.update_settings({"draft_block_size": 4})  # the acceptance below is block 4's
    page = open_page(DESKTOP)
    for toggle in ("#history-toggle", "#settings-toggle"):
        assert page.locator(toggle).get_attribute("aria-expanded") == "true"
    view = start_race(page, "Convert 5 km to meters, and tell me how long that takes to walk at a steady pace", 3)
    page.wait_for_selector(".msg.race .race-lane[data-state=streaming] .lane-clock:not(:empty)")
    lines = page.evaluate(LANE_HEAD_LINES)
    screenshot(page, "race-live")
    assert len(lines) == 2 and max(lines) < 1.5, lines
    page.wait_for_selector('.msg.race[data-state="done"]', timeout=30_000)
    painted(page)
    for lane in ("off", "on"):
        assert view.locator(f".race-lane[data-lane={lane}] .lane-clock").inner_text().startswith("done in")
    # Two of three drafts kept: acceptance reads fair in the drafter-on lane and in the summary alike.
    for where in (".race-lane[data-lane=on] .lane-numbers", "tr[data-row=acceptance]"):
        assert view.locator(f"{where} .acceptance-value").get_attribute("data-level") == "fair", where
    lines = page.evaluate(LANE_HEAD_LINES)
    screenshot(page, "race-done")
    assert len(lines) == 2 and max(lines) < 1.5, lines
    assert box(page, ".chat")["width"] >= CHAT_MIN_PX
    assert page.evaluate(OVERFLOWING) == []


# Each cell of the race summary's table but the fifteen depths: its text and how many lines that takes.
SUMMARY_CELL_LINES = """() => [...document.querySelectorAll('.msg.race .race-table :is(th, td)')]
  .filter((cell) => cell.textContent && !cell.matches('tr[data-row=by_depth] td:last-child'))
  .map((cell) => {
    const text = document.createRange();
    text.selectNodeContents(cell);  // the text's own box: a cell is as tall as its row
    return [cell.textContent, text.getBoundingClientRect().height / parseFloat(getComputedStyle(cell).lineHeight)];
  })"""


def test_the_race_summary_keeps_its_cells_on_one_line_at_block_16(open_page, fake_server):
    fake_server.engine.delay_s = 0.005
    page = open_page(DESKTOP)
    set_setting(page, "draft_block_size", "16")
    view = start_race(page, "Convert 5 km to meters", 3)
    page.wait_for_selector('.msg.race[data-state="done"]', timeout=60_000)
    depths = view.locator("tr[data-row=by_depth] td").nth(1)
    assert depths.locator(".acceptance-value").count() == 15
    view.locator(".race-table").scroll_into_view_if_needed()
    screenshot(page, "race-summary-block-16")
    # Fifteen depths wrap inside their cell; the names and the medians with their spreads keep one line.
    cells = page.evaluate(SUMMARY_CELL_LINES)
    assert any("–" in text and "(" in text for text, _ in cells), cells  # three runs: spreads shown
    assert len(cells) == 19 and all(lines < 1.5 for _, lines in cells), cells  # with the draft block's row
    cell, table = depths.bounding_box(), view.locator(".race-table").bounding_box()
    assert cell["x"] + cell["width"] <= table["x"] + table["width"] + 1
    assert page.evaluate(OVERFLOWING) == []

def reply_at_block(page, block: int, replies: int):
    set_setting(page, "draft_block_size", str(block))
    page.fill("#prompt", f"Tell me something at block {block}")
    page.press("#prompt", "Enter")
    page.wait_for_function(
        f"() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === {replies}", timeout=15_000)
    return page.locator(".msg.assistant").nth(replies - 1)


def test_acceptance_is_coloured_by_its_value_and_chips_stay_in_their_column(open_page):
    page = open_page(DESKTOP)
    # The fake engine keeps up to three drafts a round: nearly all of one draft, few of fifteen.
    high = reply_at_block(page, 2, 1).locator("[data-stat=acceptance] .acceptance-value")
    low_reply = reply_at_block(page, 16, 2)
    low = low_reply.locator("[data-stat=acceptance] .acceptance-value")
    assert int(high.inner_text().rstrip("%")) >= 70 and int(low.inner_text().rstrip("%")) < 40
    assert high.get_attribute("data-level") == "good" and low.get_attribute("data-level") == "low"
    colour = lambda el: el.evaluate("e => getComputedStyle(e).color")  # noqa: E731
    assert colour(high) != colour(low)
    assert colour(low) != colour(low_reply.locator("[data-stat=tokens] .stat-value"))

    screenshot(page, "acceptance")

    # Fifteen depths: on a phone the chip wraps inside the reply's column instead of running out of it.
    page.set_viewport_size({"width": PHONE[0], "height": PHONE[1]})
    chip = low_reply.locator("[data-stat=acceptance_by_depth]")
    assert chip.locator(".acceptance-value").count() == 15
    chip.scroll_into_view_if_needed()
    chip_box, column = chip.bounding_box(), low_reply.bounding_box()
    assert chip_box["x"] >= column["x"] and chip_box["x"] + chip_box["width"] <= column["x"] + column["width"] + 1
    line = chip.evaluate("e => parseFloat(getComputedStyle(e).lineHeight)")
    assert chip_box["height"] > 1.5 * line  # wrapped
    screenshot(page, "acceptance-phone")
    assert page.evaluate(OVERFLOWING) == []


@pytest.fixture
def mlx_page(browser, mlx_server):
    yield from ready_page(browser, mlx_server.url)


def test_the_header_names_the_model_by_its_folder(mlx_page, tiny_model):
    model = mlx_page.locator("#engine .engine-model")
    assert model.inner_text() == tiny_model.name
    assert model.get_attribute("title") == str(tiny_model)
