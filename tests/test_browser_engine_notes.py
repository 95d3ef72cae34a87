"""In Chromium on the fake engine: what the page says from the engine's own measurements and choices, where
the engine gives them and not where it does not (older engines): why drafting loses on a CPU
(`quantized_verify_ratio`) in the not-paying-off advice, and why a model does not run on specchat's own loop
(`decode_loop_reason`) in the settings pane, beside the drafter's settings."""

import json

import pytest


pytestmark = pytest.mark.browser

COST = "Quantized products are slow on a CPU: verifying 4 tokens costs 3.6× one step here."

SLOW_NOTE = """async ({engine}) => {
  const m = await import("@app/race-summary.js");
  const el = document.createElement("div");
  m.renderRaceSummary(el, {
    type: "race_done", id: "r", finish_reason: "stop", runs: 5, block_size: 16, verdict: "slower",
    off: { tok_s: { median: 54, min: 50, max: 58 }, ttft_ms: null, stats: null },
    on: { tok_s: { median: 40, min: 38, max: 42 }, ttft_ms: null, stats: null, acceptance: 0.98,
          acceptance_by_depth: Array(15).fill(0.98), mean_accepted: 14.7 },
    speedup: { median: 0.74, min: 0.7, max: 0.8 }, identical: true, first_divergence: null,
    ratios: [0.7, 0.72, 0.74, 0.76, 0.8], wins: 0, confidence: { low: 0.7, high: 0.8, coverage: 0.9375 },
    busy: null,
  }, engine);
  return el.querySelector(".note-slow-draft")?.textContent ?? null;
}"""


def open_page(browser, server, engine_fields=None):
    """A page on `server` whose `hello` and `engine` frames carry `engine_fields` in their engine info."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()

    def route(ws):
        upstream = ws.connect_to_server()
        ws.on_message(lambda message: upstream.send(message))

        def down(message):
            frame = json.loads(message)
            if engine_fields and frame.get("type") in ("hello", "engine"):
                frame["engine"] = {**frame["engine"], **engine_fields}
                message = json.dumps(frame)
            ws.send(message)

        upstream.on_message(down)

    page.route_web_socket("**/ws*", route)
    page.goto(server.url + "/")
    page.wait_for_selector("#engine[data-state=ready]")
    page.wait_for_selector("#settings [name=decode_loop]")
    return context, page


def test_the_advice_says_what_verifying_costs_where_the_engine_measured_it(browser, fake_server):
    context, page = open_page(browser, fake_server)
    try:
        plain = ("Drafting is not paying off here at block 16. By how many drafts were kept at each depth, no block "
                 "below 16 should beat the drafter off.")
        assert page.evaluate(SLOW_NOTE, {"engine": None}) == plain
        assert page.evaluate(SLOW_NOTE, {"engine": {"name": "fake"}}) == plain  # an older engine's info
        assert page.evaluate(SLOW_NOTE, {"engine": {"quantized_verify_ratio": None}}) == plain
        assert page.evaluate(SLOW_NOTE, {"engine": {"quantized_verify_ratio": 3.6}}) == f"{plain} {COST}"
        cost = page.evaluate(
            "async (ratio) => (await import('@app/baseline.js')).costText({ quantized_verify_ratio: ratio })", 3.5714)
        assert cost == COST
    finally:
        context.close()


def test_the_settings_pane_says_why_a_model_is_not_on_the_own_loop(browser, fake_server):
    reason = "its attention is not one the own loop compiles"
    context, page = open_page(browser, fake_server, {"decode_loop": "mlx-vlm", "decode_loop_reason": reason})
    try:
        note = page.locator("#setting-decode_loop-note")
        note.wait_for()
        assert note.inner_text() == f"Runs on mlx-vlm's loop, not specchat's own: {reason}."
        described = page.locator("#settings [name=decode_loop]").get_attribute("aria-describedby")
        assert "setting-decode_loop-note" in described.split()
    finally:
        context.close()


def test_no_loop_note_where_the_engine_gives_no_reason(browser, fake_server):
    for fields in (None, {"decode_loop": "specchat", "decode_loop_reason": None}):
        context, page = open_page(browser, fake_server, fields)
        try:
            note = page.locator("#setting-decode_loop-note")
            assert note.count() == 0 or note.is_hidden(), fields
            assert page.locator("#settings [name=decode_loop]").is_visible()
        finally:
            context.close()
