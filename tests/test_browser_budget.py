"""The stats line says which bound held thinking at the reasoning budget, in headless Chromium against the
server on the OpenAI-compatible engine (the fake MTPLX daemon as its server, seven thinking tokens a reply)."""

import pytest

from tests.support.browser import ready_page, set_setting
from tests.support.fake_mtplx import FakeDaemon

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def daemon():
    server = FakeDaemon("--model", "org/Qwen3.5-9B-MTPLX")
    yield server
    server.stop()


def test_the_stats_line_says_how_the_budget_held(browser, daemon, start_server):
    server = start_server("--engine", "openai", "--base-url", daemon.url + "/v1")
    server.wait_ready(timeout=30)
    for page in ready_page(browser, server.url):
        for n, (budget, shown) in enumerate([("3", "budget cut by specchat"), ("7", "budget closed by server"),
                                             ("64", None)], start=1):
            set_setting(page, "reasoning_budget", budget)
            page.fill("#prompt", f"hi {n}")
            page.press("#prompt", "Enter")
            page.wait_for_function(
                f"() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === {n}")
            chip = page.locator(".msg.assistant").last.locator('[data-stat="budget_bound"]')
            if shown is None:
                assert chip.count() == 0
            else:
                assert chip.inner_text() == shown
