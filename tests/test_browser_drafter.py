"""A checkpoint converted without its MTP head, with no drafter to be found: the header and the settings pane
say what to do, and the Race button is off and says why (headless Chromium, the real server and MLX)."""

import pytest

from tests.support.browser import ready_page
from tests.support.harness import ServerProcess


pytestmark = pytest.mark.browser


@pytest.fixture
def headless_server(converted, tmp_path, monkeypatch):
    headless, _ = converted
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))  # its base model is nowhere here
    server = ServerProcess(["--model", str(headless)], tmp_path / "data")
    yield server
    server.stop()


def test_no_drafter_is_explained_where_the_presenter_looks(browser, headless_server, converted):
    headless, _ = converted
    note = headless_server.wait_ready()["drafter_note"]
    assert note.startswith("This conversion dropped its MTP head")
    command = f"specchat drafter --for {headless} --allow-downloads"
    assert command in note
    for page in ready_page(browser, headless_server.url):
        header = page.locator("#engine .engine-message")
        assert header.inner_text() == note
        assert page.locator("#engine .engine-drafter").inner_text() == "no drafter"

        race = page.locator("#race")
        page.fill("#prompt", "hello")
        assert race.is_disabled() and page.locator("#sweep").is_disabled()
        assert page.locator("#send").is_enabled()  # a plain reply still goes
        assert race.get_attribute("title") == f"No drafter to race: {note}"
        assert race.get_attribute("aria-description") == race.get_attribute("title")

        pane_note = page.locator("#settings #setting-speculative-note")  # the pane is open beside at this width
        pane_note.wait_for(timeout=60_000)
        assert pane_note.is_visible() and pane_note.inner_text() == note
        described = page.locator("#setting-speculative").get_attribute("aria-describedby").split()
        assert "setting-speculative-note" in described
