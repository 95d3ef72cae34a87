"""A tab beside the OpenAI-compatible API: while the model answers a request, the page says so and holds its
send (typing goes on), then sends once the request is done."""

import threading

import pytest
import requests

from tests.support.browser import send

pytestmark = pytest.mark.browser


def test_the_page_says_the_model_answers_the_api_and_sends_after(open_page, fake_server):
    page = open_page()
    engine = fake_server.engine
    engine.holds = [1]
    answered = {}
    request = threading.Thread(target=lambda: answered.update(response=requests.post(
        fake_server.url + "/v1/chat/completions", timeout=60,
        json={"model": "fake-model", "messages": [{"role": "user", "content": "from a script"}]})))
    request.start()
    hint = page.locator("#composer-hint")
    hint.filter(has_text="answering a request from the API").wait_for(timeout=10_000)
    page.fill("#prompt", "typed meanwhile")
    assert page.locator("#send").is_disabled()
    engine.resume()
    request.join(timeout=30)
    assert answered["response"].status_code == 200
    page.wait_for_function("() => !document.querySelector('#send').disabled", timeout=10_000)
    assert page.input_value("#prompt") == "typed meanwhile"
    page.fill("#prompt", "")
    send(page, "now from the tab")
    asked = [t.messages[-1].content for t in engine.turns]
    assert asked.index("from a script") < asked.index("now from the tab")  # (a calibration may run between)
