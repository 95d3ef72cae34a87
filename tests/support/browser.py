"""Headless Chromium for the browser tests: how it is launched, pages that fail a test on any page or console
error, and the steps several tests take on the chat page and on a race. The fixtures are in tests/conftest.py."""

from __future__ import annotations

import json
import os
import shutil
from decimal import ROUND_HALF_UP, Decimal

from tests.support.poll import wait_until

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
PHONE, TABLET, DESKTOP = (390, 844), (820, 1180), (1280, 800)


def chromium_executable() -> str | None:
    """Debian's Chromium where present (no browser download needed), else None: Playwright's own."""
    return os.environ.get("SPECCHAT_CHROMIUM") or shutil.which("chromium")


def chromium_env() -> dict[str, str]:
    """This environment without the BLAS make test preloads for MLX: Chromium's GPU process dies with it."""
    blas = os.environ.get("SPECCHAT_BLAS")
    kept = [lib for lib in os.environ.get("LD_PRELOAD", "").split(":") if lib and lib != blas]
    return {**os.environ, "LD_PRELOAD": ":".join(kept)}


def collect_errors(page, errors: list[str]) -> None:
    """Every uncaught page error and console error of ``page`` goes into ``errors``."""
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))


def wait_ready(page, timeout_ms: int = 30_000) -> None:
    """Wait until the engine is ready and the settings pane holds the server's settings: the pane lays its
    sections out once they arrive, which moves what lies below them, so a click made before then can land
    where a control used to be (seen on a loaded machine)."""
    page.wait_for_selector("#engine[data-state=ready]", timeout=timeout_ms)
    page.wait_for_selector("#settings .settings-waiting", state="detached", timeout=timeout_ms)


def ready_page(browser, url: str):
    """A page on ``url`` once its engine is ready; after the test, no page or console error may have shown."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors = []
    collect_errors(page, errors)
    page.goto(url + "/")
    wait_ready(page, 60_000)
    yield page
    context.close()
    assert errors == []


def set_setting(page, name: str, value: str) -> None:
    field = page.locator(f'#settings [name="{name}"]')
    field.fill(value)
    field.dispatch_event("change")
    page.wait_for_function(
        f'() => document.querySelector(\'#settings [name="{name}"]\').value === "{value}"'
        " && !document.querySelector('#settings-error')?.textContent.trim()"
    )


def painted(page) -> None:
    """Wait for the page to draw what it holds: a reply's or a lane's text, stats and notes land on the animation
    frame after the state that says it is done or streaming (static/js/render.js)."""
    page.evaluate("() => new Promise((drawn) => requestAnimationFrame(() => requestAnimationFrame(drawn)))")


def done_count(page, count: int) -> None:
    page.wait_for_function(
        f"() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === {count}", timeout=15_000)
    painted(page)


def send(page, text: str, replies: int = 1) -> None:
    """Type ``text``, press Enter and wait until ``replies`` replies are done."""
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")
    done_count(page, replies)


# Elements whose box reaches past the viewport's left or right edge where it is not clipped by a
# scrolling or clipping ancestor (text cut by an ellipsis is inside its own box).
OVERFLOWING = """() => {
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    let r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let left = r.left, right = r.right;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') {
        const c = a.getBoundingClientRect();
        left = Math.max(left, c.left);
        right = Math.min(right, c.right);
      }
    }
    if (right > left && (left < -1 || right > innerWidth + 1)) {
      out.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(left)}-${Math.round(right)}`);
    }
  }
  return out;
}"""


class Tab:
    """A tab on the fake server, with every frame the server sent it and every frame it sent."""

    def __init__(self, page, server):
        self.page = page
        self.server = server
        self.frames: list[dict] = []
        self.sent: list[dict] = []
        page.on("websocket", lambda ws: (ws.on("framereceived", lambda payload: self.frames.append(json.loads(payload))),
                                         ws.on("framesent", lambda payload: self.sent.append(json.loads(payload)))))

    def open(self) -> None:
        self.page.goto(self.server.url + "/")
        wait_ready(self.page)

    def of_type(self, kind: str) -> list[dict]:
        return [f for f in self.frames if f.get("type") == kind]


def wait_in_page(page, predicate, timeout: float = 10.0, interval: float = 0.02) -> bool:
    """``wait_until`` with the page's own wait passing the time, so that its events are delivered meanwhile."""
    return wait_until(predicate, timeout, interval, sleep=lambda s: page.wait_for_timeout(s * 1000))


def wait_for_frame(tab: Tab, kind: str, since: int, timeout_ms: int = 5000) -> dict:
    """The first frame of `kind` after the first `since` frames, waiting for it to arrive."""
    def found() -> list[dict]:
        return [f for f in tab.frames[since:] if f.get("type") == kind]

    if not wait_in_page(tab.page, found, timeout_ms / 1000, 0.05):
        raise AssertionError(f"no {kind} frame arrived")
    return found()[0]


def start_race(page, text: str, runs: int):
    """Type ``text``, pick ``runs`` and press Race; the race's view once it is on the page."""
    page.fill("#prompt", text)
    page.select_option("#race-runs", str(runs))
    page.get_by_role("button", name="Race drafter off vs on").click()
    view = page.locator(".msg.race").last
    view.wait_for()
    return view


def race(tab: Tab, text: str, runs: int):
    return start_race(tab.page, text, runs)


def wait_race_done(tab: Tab, count: int = 1) -> dict:
    tab.page.wait_for_function(
        f"() => document.querySelectorAll('.msg.race[data-state=\"done\"]').length === {count}", timeout=30_000)
    painted(tab.page)
    return tab.of_type("race_done")[-1]


def factor(ratio: float) -> str:
    """A speed-up as the UI writes it: Intl.NumberFormat rounds the shortest decimal form half up
    (3.505 → "3.51"), where Python's format rounds the binary value (3.505 → "3.50")."""
    return f"{Decimal(repr(ratio)).quantize(Decimal('0.01'), ROUND_HALF_UP)}×"


def evaluate(tab: Tab, module: str, body: str, arg=None):
    """Run `body` (a function of the module `m` and `arg`) in the page, with the app's own module."""
    return tab.page.evaluate(f"async (arg) => {{ const m = await import('@app/{module}'); return ({body})(m, arg); }}",
                             arg)


def summary_frame(**fields) -> dict:
    """A race_done frame of five pairs, drafter on slower, with ``fields`` in place of its own."""
    frame = {"type": "race_done", "id": "r", "finish_reason": "stop", "runs": 5,
             "off": {"tok_s": {"median": 54.0, "min": 50.0, "max": 58.0}, "ttft_ms": None, "stats": None},
             "on": {"tok_s": {"median": 40.0, "min": 38.0, "max": 42.0}, "ttft_ms": None, "stats": None,
                    "acceptance": 0.98, "acceptance_by_depth": [0.98] * 15, "mean_accepted": 14.7},
             "speedup": {"median": 0.74, "min": 0.7, "max": 0.8}, "identical": True, "first_divergence": None,
             "ratios": [0.7, 0.72, 0.74, 0.76, 0.8], "wins": 0,
             "confidence": {"low": 0.7, "high": 0.8, "coverage": 0.9375}, "verdict": "slower", "busy": None,
             "block_size": 16}
    return {**frame, **fields}
