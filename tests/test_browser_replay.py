"""In Chromium on the fake engine: a reloaded page draws a race again from its replayed frames (during and after
it), and a block sweep's receipt is one click away."""

import pytest
import requests

from tests.support.browser import painted, race, wait_race_done


pytestmark = pytest.mark.browser


def lane_text(view, lane: str, part: str) -> str:
    return view.locator(f".race-lane[data-lane={lane}] .lane-{part}").inner_text()


def reload(tab) -> None:
    tab.frames.clear()
    tab.page.reload()
    tab.page.wait_for_selector("#engine[data-state=ready]")


def test_a_page_reloaded_mid_race_draws_both_lanes_again_and_follows_the_race(tab):
    engine = tab.server.engine
    engine.delay_s = 0.02
    engine.holds = [6]  # the first lane pauses six tokens in (the warm-up is cancelled at its first)
    tab.open()
    race(tab, "Convert 5 km to meters", 2)
    page = tab.page
    page.wait_for_function("() => document.querySelector('.race-lane[data-lane=off] .lane-thinking')"
                           "?.textContent.split(' ').filter(Boolean).length >= 6")
    before = lane_text(page.locator(".msg.race"), "off", "thinking")

    reload(tab)
    view = page.locator(".msg.race")
    view.wait_for()
    page.wait_for_selector(".msg.race .race-lane[data-lane=off][data-state=streaming]")
    painted(page)
    assert lane_text(view, "off", "thinking") == before  # the lane from its start, as it was
    assert page.locator(".msg.assistant").count() == 0  # the race's stored reply is not drawn twice
    assert page.locator("#stop").is_visible()  # the page follows the race as its own
    assert page.locator(".msg.user .bubble").inner_text() == "Convert 5 km to meters"

    engine.resume()
    done = wait_race_done(tab)
    assert done["finish_reason"] == "stop" and done["runs"] == 2
    for lane in ("off", "on"):
        box = view.locator(f".race-lane[data-lane={lane}]")
        assert box.get_attribute("data-state") == "done"
        assert "Here is an answer with code" in lane_text(view, lane, "answer")
        assert "run 2 of 2" in box.locator(".lane-run").inner_text()
    assert view.locator(".race-verdict").is_visible()
    assert page.get_by_role("button", name="Replay race").is_enabled()
    assert page.locator("#send").is_visible()


def test_a_page_reloaded_after_a_race_shows_its_lanes_and_summary(tab):
    tab.open()
    race(tab, "Convert 5 km to meters", 1)
    done = wait_race_done(tab)
    verdict = tab.page.locator(".race-verdict").inner_text()

    reload(tab)
    page = tab.page
    page.wait_for_selector('.msg.race[data-state="done"]')
    painted(page)
    view = page.locator(".msg.race")
    assert view.locator(".race-verdict").inner_text() == verdict
    for lane in ("off", "on"):
        assert view.locator(f".race-lane[data-lane={lane}]").get_attribute("data-state") == "done"
        assert "Here is an answer with code" in lane_text(view, lane, "answer")
    assert view.get_by_role("link", name="Open receipt as Markdown").get_attribute("href") == \
        f"/api/receipts/{done['id']}?format=markdown"
    assert page.locator("#send").is_visible() and page.locator(".msg.assistant").count() == 0


def test_a_sweep_saves_its_receipt(tab, tmp_path):
    tab.open()
    page = tab.page
    page.fill("#prompt", "hello")
    page.get_by_role("button", name="Find the best block size").click()
    page.wait_for_selector('.msg.sweep[data-state="done"]', timeout=60_000)
    done = tab.of_type("sweep_done")[-1]
    with page.expect_download() as download:
        page.get_by_role("button", name="Save sweep receipt").click()
    assert download.value.suggested_filename == f"specchat-sweep-{done['id']}.md"
    path = tmp_path / "receipt.md"
    download.value.save_as(path)
    saved = path.read_text()
    assert saved.startswith(f"# specchat block sweep {done['id']}") and "--blocks 1,2,3,4,5,6" in saved
    assert page.locator(".msg.sweep .race-receipt-status").inner_text() == "Saved the receipt."
    view = page.locator(".msg.sweep")
    for name, kind in (("Open sweep receipt as Markdown", "markdown"), ("Download sweep receipt as JSON", "json")):
        href = view.get_by_role("link", name=name).get_attribute("href")
        answer = requests.get(tab.server.url + href, timeout=10)
        assert answer.status_code == 200
        if kind == "json":
            assert answer.json()["receipt"]["rows"] == done["rows"]
        else:
            assert answer.text == saved


def test_a_page_reloaded_during_a_continuation_shows_the_whole_reply(tab):
    from engines.fake import ANSWER, THINKING

    engine = tab.server.engine
    tab.server.host.update_settings({"speculative": False})  # a word per step: the pauses land where asked
    engine.holds = [len(THINKING.split()) + 2]  # two words into the answer
    tab.open()
    page = tab.page
    page.fill("#prompt", "tell me")
    page.press("#prompt", "Enter")
    page.wait_for_function("() => document.querySelector('.msg.assistant .answer')?.textContent.trim() !== ''")
    page.click("#stop")
    page.wait_for_selector('.msg.assistant[data-finish="cancelled"]')
    before = page.locator(".msg.assistant .answer").inner_text()
    engine.holds = [2]  # the continuation pauses two words in, two before its end
    page.get_by_role("button", name="Continue reply", exact=True).click()
    page.wait_for_function(f"() => document.querySelector('.msg.assistant .answer').textContent.length > "
                           f"{len(before) + 2}")

    reload(tab)
    reply = page.locator(".msg.assistant")
    page.wait_for_selector('.msg.assistant[data-state="streaming"]')
    # the page draws what it was sent at its next frame, not with the state
    page.wait_for_function(f"() => document.querySelector('.msg.assistant .answer').textContent.length > "
                           f"{len(before)}")
    shown = reply.locator(".answer").inner_text()
    assert shown.startswith(before) and len(shown) > len(before)  # the stored part, then the continuation
    assert reply.locator(".thinking-body").text_content().strip() == THINKING.strip()
    engine.resume()
    page.wait_for_selector('.msg.assistant[data-finish="stop"] .msg-actions:not([hidden])')
    assert page.locator(".msg.assistant").count() == 1
    whole = reply.locator(".answer").evaluate("el => el.textContent")
    assert whole.split()[:2] == ANSWER.split()[:2] and "print('hello')" in whole and whole.strip().endswith("Done.")
    reload(tab)  # and from the store
    page.wait_for_selector('.msg.assistant[data-finish="stop"]')
    painted(page)
    assert reply.locator(".answer").evaluate("el => el.textContent") == whole
