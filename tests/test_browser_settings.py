"""The quick bar and the settings pane in headless Chromium against the server on the fake engine: one click
or key per change, saved and broadcast like a pane edit and showing other tabs' changes live; the pane shows
each field's range (the system prompt a counter), puts errors next to their field in its own words, and
never overwrites what is being typed or was not accepted."""

import threading
import time

import pytest
import requests

from engines.options import GenerationOptions
from tests.support.browser import painted, wait_in_page
from webapp.errors import ClientError

pytestmark = pytest.mark.browser


def server_settings(server) -> dict:
    return requests.get(f"{server.url}/api/settings", timeout=5).json()["values"]


def other_tab(server, **values) -> None:
    """A change made elsewhere: the server broadcasts it to every tab."""
    assert requests.post(f"{server.url}/api/settings", json=values, timeout=5).status_code == 200


def server_has(page, server, **values) -> bool:
    """Whether the server comes to hold ``values``: the bar and the pane show a change at once, before the
    server has stored it."""
    return wait_in_page(page, lambda: values.items() <= server_settings(server).items())


def wait_quick(page, name: str, text: str) -> None:
    page.wait_for_function(
        f"() => document.querySelector('#quick-bar [data-quick={name}]').textContent === {text!r}")


def test_the_quick_bar_changes_settings_with_one_click_or_key(open_page, fake_server):
    page = open_page()
    start = server_settings(fake_server)
    assert start["speculative"] is True and start["draft_block_size"] == "auto" and start["reasoning_budget"] == 512
    wait_quick(page, "block", "auto")
    assert page.locator("#quick-bar [data-quick=blockDown]").is_disabled()  # "auto" is below the smallest block
    bar = page.locator("#quick-bar")
    # Every control says what it acts on and which key does it.
    for name, key in [("drafter", "Alt+D"), ("blockUp", "Alt+B"), ("blockDown", "Alt+Shift+B"),
                      ("budgetUp", "Alt+T"), ("budgetDown", "Alt+Shift+T"), ("resetCache", "Alt+R")]:
        button = bar.locator(f"[data-quick={name}]")
        assert key in button.get_attribute("title") and button.get_attribute("aria-keyshortcuts") == key

    drafter = bar.locator("[data-quick=drafter]")
    drafter.click()
    page.wait_for_function("() => document.querySelector('#quick-bar [data-quick=drafter]')"
                           ".getAttribute('aria-pressed') === 'false'")
    # ?. waits for the pane's form as well, which a busy machine may not have built yet
    page.wait_for_function("() => document.querySelector('#settings [name=speculative]')?.checked === false")
    server_has(page, fake_server, speculative=False)
    assert server_settings(fake_server)["speculative"] is False

    page.focus("#prompt")  # the keys work while typing a message
    page.keyboard.press("Alt+D")
    page.keyboard.press("Alt+B")  # up from "auto" before it chose a block: the smallest
    wait_quick(page, "block", "2")
    page.keyboard.press("Alt+B")
    wait_quick(page, "block", "3")
    page.keyboard.press("Alt+Shift+T")
    wait_quick(page, "budget", "256")
    page.wait_for_function("() => document.querySelector('#settings [name=reasoning_budget]')?.value === '256'")
    server_has(page, fake_server, speculative=True, draft_block_size=3, reasoning_budget=256)
    values = server_settings(fake_server)
    assert (values["speculative"], values["draft_block_size"], values["reasoning_budget"]) == (True, 3, 256)
    assert page.input_value("#prompt") == ""  # the keys typed nothing

    bar.locator("[data-quick=blockDown]").click()
    bar.locator("[data-quick=blockDown]").click()  # down from the smallest block: "auto"
    bar.locator("[data-quick=budgetUp]").click()
    wait_quick(page, "block", "auto")
    server_has(page, fake_server, draft_block_size="auto")
    wait_quick(page, "budget", "512")
    for _ in range(4):
        page.keyboard.press("Alt+Shift+T")
    wait_quick(page, "budget", "off")
    # The server's answers to the four presses arrive after the bar showed "off"; the last one settles it, and
    # only then has the server surely stored it.
    page.wait_for_function("() => document.querySelector('#quick-bar [data-quick=budgetDown]').disabled")
    server_has(page, fake_server, reasoning_budget=0)
    assert server_settings(fake_server)["reasoning_budget"] == 0
    assert bar.locator("[data-quick=budgetDown]").is_disabled()
    assert bar.locator("[data-quick=budget]").inner_text() == "off"

    page.fill("#prompt", "hello")
    page.press("#prompt", "Enter")
    page.wait_for_selector('.msg.assistant[data-state="done"]')
    page.keyboard.press("Alt+R")
    page.wait_for_function("() => /Freed \\d+ prompt tokens/.test("
                           "document.querySelector('#quick-bar [data-quick=status]').textContent)")
    assert fake_server.engine._seen == {}


def test_the_quick_bar_and_the_pane_show_other_tabs_changes_live(open_page, fake_server):
    other_tab(fake_server, draft_block_size=4)
    page = open_page()
    second = open_page()
    wait_quick(page, "block", "4")
    second.locator("#quick-bar [data-quick=blockUp]").click()
    wait_quick(page, "block", "5")
    page.wait_for_function("() => document.querySelector('#settings [name=draft_block_size]')?.value === '5'")
    other_tab(fake_server, speculative=False, reasoning_budget=1000)
    wait_quick(page, "budget", "1000")
    wait_quick(second, "budget", "1000")
    assert page.locator("#quick-bar [data-quick=drafter]").get_attribute("aria-pressed") == "false"
    # From an odd budget the steps go to the next one each way.
    page.locator("#quick-bar [data-quick=budgetUp]").click()
    wait_quick(second, "budget", "1024")


def test_a_broadcast_never_overwrites_what_is_being_typed(open_page, fake_server):
    page = open_page()
    page.wait_for_selector("#settings [name=system_prompt]")
    prompt = page.locator("#settings [name=system_prompt]")
    prompt.fill("")
    prompt.type("Answer in vers")  # sent 0.6 s after the last keystroke
    # The other tab's change comes while this one is still typing: keystrokes that leave the text as it is keep
    # the 0.6 s from running out until the change has shown, however long it takes to come.
    changing = threading.Thread(target=other_tab, args=(fake_server,),
                                kwargs={"system_prompt": "Something else", "draft_block_size": 7})
    changing.start()
    deadline = time.monotonic() + 30
    while page.locator("#quick-bar [data-quick=block]").text_content() != "7":
        assert time.monotonic() < deadline, "the other tab's change did not show"
        prompt.press("Space")
        prompt.press("Backspace")
    changing.join(timeout=10)
    prompt.type("e")
    assert prompt.input_value() == "Answer in verse"
    page.wait_for_function("() => document.querySelector('#settings-status').textContent.startsWith('Saved')")
    assert server_settings(fake_server)["system_prompt"] == "Answer in verse"

    # A value the pane refuses stays as typed, with its error beside it, through another tab's change.
    block = page.locator("#settings [name=draft_block_size]")
    block.fill("99")
    block.press("Tab")
    error = page.locator("#setting-draft_block_size-error")
    assert error.inner_text() == "Draft block size must be from 2 to 16 tokens, or auto."
    assert block.get_attribute("aria-invalid") == "true"
    assert server_settings(fake_server)["draft_block_size"] == 7
    other_tab(fake_server, draft_block_size=3)
    wait_quick(page, "block", "3")
    assert block.input_value() == "99"
    # Fixing it sends it and clears the error; later changes show again.
    block.fill("6")
    block.press("Tab")
    page.wait_for_function("() => document.querySelector('#quick-bar [data-quick=block]').textContent === '6'")
    assert error.is_hidden() and block.get_attribute("aria-invalid") is None
    other_tab(fake_server, draft_block_size=8)
    page.wait_for_function("() => document.querySelector('#settings [name=draft_block_size]')?.value === '8'")


def test_each_field_shows_its_range_and_the_system_prompt_a_counter(open_page, fake_server):
    page = open_page()
    page.wait_for_selector("#settings [name=system_prompt]")
    schema = GenerationOptions.model_json_schema()["properties"]
    numeric = [key for key, prop in schema.items() if prop.get("type") in ("integer", "number")]
    assert numeric
    for key in numeric:
        prop = schema[key]
        field = page.locator(f"#settings [name={key}]")
        low = prop.get("minimum", prop.get("exclusiveMinimum"))
        attribute = "min" if "minimum" in prop else "data-above"
        assert float(field.get_attribute(attribute)) == low, key
        assert float(field.get_attribute("max")) == prop["maximum"], key
        shown = page.locator(f"#setting-{key}-range").inner_text()
        assert f"{prop['maximum']:,}".removesuffix(".0") in shown and f"{low:,}".removesuffix(".0") in shown, key
        assert f"setting-{key}-range" in field.get_attribute("aria-describedby")

    limit = schema["system_prompt"]["maxLength"]
    counter = page.locator("#setting-system_prompt-counter")
    prompt = page.locator("#settings [name=system_prompt]")
    assert counter.inner_text() == f"{len(prompt.input_value()):,} / {limit:,} characters"
    prompt.fill("x" * (limit + 1))
    assert counter.inner_text() == f"{limit + 1:,} / {limit:,} characters"
    page.wait_for_function("() => !document.querySelector('#setting-system_prompt-error').hidden")
    assert page.locator("#setting-system_prompt-error").inner_text() == (
        f"System prompt must be at most {limit:,} characters; it has {limit + 1:,}.")
    assert server_settings(fake_server)["system_prompt"] != "x" * (limit + 1)


def test_a_server_refusal_shows_next_to_its_field_in_its_label(open_page, fake_server, monkeypatch):
    page = open_page()
    page.wait_for_selector("#settings [name=temperature]")

    def tighter(values):  # a server whose limit is tighter than the page knows
        raise ClientError("invalid_settings", "Settings not changed: temperature: Input should be less than or "
                          "equal to 1.5.")

    monkeypatch.setattr(fake_server.host.settings, "update", tighter)
    field = page.locator("#settings [name=temperature]")
    field.fill("1.8")
    field.press("Tab")
    error = page.locator("#setting-temperature-error")
    error.wait_for()
    assert error.inner_text() == "Temperature: Input should be less than or equal to 1.5."
    assert page.locator("#settings-error").is_hidden()
    assert field.input_value() == "1.8"


def test_quick_bar_presses_in_flight_never_show_an_older_value(browser, fake_server):
    """Rapid presses: the server's answers to the earlier ones (held back here, as on a slow link) must not
    put the bar back to an older value before the last answer arrives."""
    import json

    held, routes = [], []

    def route(ws):
        server = ws.connect_to_server()
        routes.append(ws)
        ws.on_message(lambda message: server.send(message))
        server.on_message(lambda message: held.append(message) if json.loads(message).get("type") == "settings"
                          else ws.send(message))

    context = browser.new_context()
    try:
        page = context.new_page()
        page.route_web_socket("**/ws*", route)
        # Counts the settings answers the page takes in, so that each released one is seen before the next;
        # added after the route, whose own script stands in for WebSocket.
        page.add_init_script("""window.settingsSeen = 0;
            window.WebSocket = class extends window.WebSocket {
                constructor(...args) {
                    super(...args);
                    this.addEventListener('message', (event) => {
                        if (JSON.parse(event.data).type === 'settings') window.settingsSeen += 1;
                    });
                }
            };""")
        other_tab(fake_server, draft_block_size=4)
        page.goto(fake_server.url)
        page.wait_for_selector("#engine[data-state=ready]")
        wait_quick(page, "block", "4")
        page.evaluate("""() => {
            const el = document.querySelector('#quick-bar [data-quick=block]');
            window.shownBlocks = [];
            new MutationObserver(() => window.shownBlocks.push(el.textContent))
                .observe(el, {childList: true, characterData: true, subtree: true});
        }""")
        for _ in range(3):
            page.locator("#quick-bar [data-quick=blockUp]").click()
        wait_quick(page, "block", "7")
        wait_in_page(page, lambda: len(held) == 3)
        assert [json.loads(m)["values"]["draft_block_size"] for m in held] == [5, 6, 7]
        for seen, message in enumerate(held, 1):  # the answers arrive, in order, after the last press
            routes[0].send(message)
            page.wait_for_function(f"() => window.settingsSeen === {seen}")
            painted(page)  # each answer drawn in a frame of its own
        wait_quick(page, "block", "7")
        shown = page.evaluate("window.shownBlocks")
        assert shown[:3] == ["5", "6", "7"], shown  # each press shows at once
        assert all(int(a) <= int(b) for a, b in zip(shown, shown[1:])), shown
        assert server_settings(fake_server)["draft_block_size"] == 7
    finally:
        context.close()


def test_the_quick_bar_and_the_pane_show_the_block_auto_chose(tab, fake_server):
    page = tab.page
    tab.open()
    wait_quick(page, "block", "auto")
    note = page.locator("#setting-draft_block_size-note")
    assert note.count() == 0 or note.is_hidden()  # nothing chosen before a reply
    page.fill("#prompt", "hello")
    page.press("#prompt", "Enter")
    page.wait_for_selector('.msg.assistant[data-state="done"]')
    chose = tab.of_type("done")[-1]["stats"]["auto_block"]
    assert chose > 1  # the fake's drafts pay
    wait_quick(page, "block", f"auto ({chose})")
    assert note.inner_text() == f"auto runs block {chose} now."
    # Rounds that now cost more than they yield: the next reply runs plain steps, and the page says so.
    fake_server.engine.round_s = 0.2
    page.fill("#prompt", "again")
    page.press("#prompt", "Enter")
    wait_quick(page, "block", "auto (off)")
    assert wait_in_page(page, lambda: len(tab.of_type("done")) == 2)
    assert tab.of_type("done")[-1]["stats"]["auto_block"] == 1
    assert note.inner_text().startswith("auto has drafting off now")
    # A fixed block shows as itself, and the note goes.
    other_tab(fake_server, draft_block_size=5)
    wait_quick(page, "block", "5")
    assert note.is_hidden()
