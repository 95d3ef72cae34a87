"""The settings pane in headless Chromium takes its labels, limits and choices from the schema the server
serves (`GET /api/settings/schema`), not from a copy of its own: they equal the model's, a served schema with
other limits moves the pane's and the quick bar's with it, and a schema that cannot load leaves a working pane
that says so."""

import json

import pytest
import requests

from engines.options import GenerationOptions

pytestmark = pytest.mark.browser


def open_with(browser, server, schema_route=None):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    if schema_route is not None:
        context.route("**/api/settings/schema", schema_route)
    page = context.new_page()
    page.goto(server.url + "/")
    page.wait_for_selector("#engine[data-state=ready]")
    page.wait_for_selector("#settings [name=system_prompt]")
    return context, page


def label_of(page, key: str) -> str:
    return page.locator(f"label[for=setting-{key}]").inner_text()


def test_labels_limits_and_choices_are_the_schemas(browser, fake_server):
    context, page = open_with(browser, fake_server)
    try:
        for key, prop in GenerationOptions.model_json_schema()["properties"].items():
            assert label_of(page, key) == prop["title"], key
            field = page.locator(f"#settings [name={key}]")
            # A number that also takes a word ("auto") is a union: its limits are its number branch's.
            number = next((b for b in prop.get("anyOf", [prop]) if b.get("type") in ("integer", "number")), None)
            if number is not None and "enum" not in prop:
                assert float(field.get_attribute("max")) == number["maximum"], key
                if "minimum" in number:
                    assert float(field.get_attribute("min")) == number["minimum"], key
                else:
                    assert float(field.get_attribute("data-above")) == number["exclusiveMinimum"], key
            if "enum" in prop:
                options = field.evaluate("(select) => [...select.options].map((option) => option.value)")
                assert options == prop["enum"], key
            if "maxLength" in prop:
                assert int(field.get_attribute("data-max-length")) == prop["maxLength"], key
    finally:
        context.close()


def test_a_served_schema_with_other_limits_moves_the_pane_and_the_quick_bar(browser, fake_server):
    schema = requests.get(f"{fake_server.url}/api/settings/schema", timeout=5).json()["schema"]
    block = schema["properties"]["draft_block_size"]
    number = next(branch for branch in block["anyOf"] if branch.get("type") == "integer")
    number["maximum"], block["title"] = 5, "Block (as served)"

    def serve(route):
        route.fulfill(status=200, content_type="application/json", body=json.dumps({"ok": True, "schema": schema}))

    assert requests.post(f"{fake_server.url}/api/settings", json={"draft_block_size": 5}, timeout=5).ok
    context, page = open_with(browser, fake_server, serve)
    try:
        field = page.locator("#settings [name=draft_block_size]")
        assert label_of(page, "draft_block_size") == "Block (as served)"
        assert field.get_attribute("max") == "5"
        assert page.locator("#setting-draft_block_size-range").inner_text() == "2 to 5 tokens, or auto"
        page.wait_for_function("() => document.querySelector('#quick-bar [data-quick=block]').textContent === '5'")
        assert page.locator("#quick-bar [data-quick=blockUp]").is_disabled()
        assert page.locator("#quick-bar [data-quick=blockDown]").is_enabled()

        field.fill("6")
        field.press("Tab")
        error = page.locator("#setting-draft_block_size-error")
        error.wait_for()
        assert error.inner_text() == "Block (as served) must be from 2 to 5 tokens, or auto."
        field.fill("auto")  # the word the schema adds is taken as it is
        field.press("Tab")
        page.wait_for_function("() => document.querySelector('#quick-bar [data-quick=block]').textContent === 'auto'")
        assert error.is_hidden()
        assert requests.get(f"{fake_server.url}/api/settings", timeout=5).json()["values"]["draft_block_size"] == "auto"
    finally:
        context.close()


def test_a_schema_that_cannot_load_leaves_a_working_pane_that_says_so(browser, fake_server):
    context, page = open_with(browser, fake_server, lambda route: route.abort())
    try:
        assert "could not be loaded" in page.locator("#settings-error").inner_text()
        field = page.locator("#settings [name=max_tokens]")
        assert field.get_attribute("max") is None  # no limits shown that were not served
        field.fill("300")
        field.press("Tab")
        page.wait_for_function("() => document.querySelector('#settings-status').textContent.startsWith('Saved')")
        assert requests.get(f"{fake_server.url}/api/settings", timeout=5).json()["values"]["max_tokens"] == 300
    finally:
        context.close()
