"""Accessibility audits in headless Chromium on a page with a conversation, the settings pane, the
conversation list and the engine picker in view.

- Text contrast, light and dark: every visible text (and placeholder, and field value) meets WCAG AA against
  its effective background: 4.5:1, or 3:1 for large text. Disabled controls are exempt, as WCAG exempts
  inactive components.
- Names: every control has an accessible name that says what it acts on, never a bare verb or symbol.
"""

import pytest

import engines.fake

pytestmark = pytest.mark.browser

ANSWER = ("A **bold** claim, a [link](https://example.com), `inline code`, $x^2$ and a table:\n\n"
          "| a | b |\n|---|---|\n| 1 | 2 |\n\n> a quote\n\n"
          "```python\ndef f(x):\n    # a comment\n    return \"text\" + str(42)\n```\n\nDone.")

# Runs in the page: every failing text as [what, text, ratio, needed, foreground, background].
AUDIT = """() => {
  const parse = (css) => {
    const m = css.match(/rgba?\\(([^)]+)\\)/);
    if (m) {
      const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    }
    const c = document.createElement('canvas').getContext('2d', { willReadFrequently: true });
    c.clearRect(0, 0, 1, 1); c.fillStyle = css; c.fillRect(0, 0, 1, 1);
    const d = c.getImageData(0, 0, 1, 1).data;
    return [d[0], d[1], d[2], d[3] / 255];
  };
  const over = (top, bottom) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat(1);
  };
  const canvas = parse(getComputedStyle(document.documentElement).backgroundColor)[3] > 0
    ? parse(getComputedStyle(document.documentElement).backgroundColor)
    : (matchMedia('(prefers-color-scheme: dark)').matches ? [18, 18, 18, 1] : [255, 255, 255, 1]);
  const background = (el) => {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const s = getComputedStyle(e);
      const opacity = Number(s.opacity);
      const bg = parse(s.backgroundColor);
      if (bg[3] > 0) layers.push([bg[0], bg[1], bg[2], bg[3] * opacity]);
    }
    let color = canvas;
    for (const layer of layers.reverse()) color = over(layer, color);
    return color;
  };
  const opacityOf = (el) => {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= Number(getComputedStyle(e).opacity);
    return o;
  };
  const lum = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => {
      v /= 255;
      return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const describe = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const failures = [];
  let checked = 0;
  const check = (el, fg, text) => {
    const s = getComputedStyle(el);
    const bg = background(el);
    const alpha = fg[3] * opacityOf(el);
    if (alpha === 0) return;
    const shown = over([fg[0], fg[1], fg[2], alpha], bg);
    const size = parseFloat(s.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(s.fontWeight) >= 700);
    const needed = large ? 3 : 4.5;
    const r = ratio(shown, bg);
    checked += 1;
    if (r < needed) {
      failures.push([describe(el), text.trim().slice(0, 40), Math.round(r * 100) / 100, needed,
                     shown.map(Math.round).join(','), bg.map(Math.round).join(',')]);
    }
  };
  for (const el of document.body.querySelectorAll('*')) {
    if (!el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
    const rect = el.getBoundingClientRect();
    if (rect.width < 2 || rect.height < 2) continue;  // visually hidden (screen reader only)
    if (el.closest(':disabled, [aria-disabled="true"]')) continue;
    const s = getComputedStyle(el);
    const own = [...el.childNodes].filter((n) => n.nodeType === 3 && n.data.trim()).map((n) => n.data).join(' ');
    if (own) check(el, parse(s.color), own);
    if ((el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') && !['checkbox', 'file', 'hidden'].includes(el.type)) {
      if (el.value) check(el, parse(s.color), el.value);
      else if (el.placeholder) check(el, parse(getComputedStyle(el, '::placeholder').color), el.placeholder);
    }
    if (el.tagName === 'SELECT' && el.selectedOptions.length) check(el, parse(s.color), el.selectedOptions[0].text);
  }
  return { checked, failures };
}"""


def busy_page(open_page, fake_server, monkeypatch):
    """A page showing most of what the app draws: a reply with thinking, Markdown, code and math, its stats
    and actions, the conversation list, the settings pane with a field error, the engine picker's models."""
    monkeypatch.setattr(engines.fake, "ANSWER", ANSWER)
    page = open_page()
    page.fill("#prompt", "show me everything")
    page.press("#prompt", "Enter")
    page.wait_for_selector('.msg.assistant[data-state="done"]')
    page.locator(".msg.assistant .thinking summary").click()  # open the thinking again
    page.locator("#model-list .model-choice").first.wait_for()
    block = page.locator("#settings [name=draft_block_size]")
    block.fill("99")
    block.press("Tab")
    page.locator("#setting-draft_block_size-error").wait_for()
    page.fill("#prompt", "")  # the placeholder shows
    page.locator("#history-list [aria-current]").first.wait_for()
    return page


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_text_contrast_meets_wcag_aa(open_page, fake_server, monkeypatch, scheme):
    page = busy_page(open_page, fake_server, monkeypatch)
    page.emulate_media(color_scheme=scheme)
    page.wait_for_function(f"() => matchMedia('(prefers-color-scheme: {scheme})').matches")
    result = page.evaluate(AUDIT)
    assert result["checked"] > 100  # the page was full
    assert result["failures"] == [], "\n".join(map(str, result["failures"]))


ROLES = {"button", "link", "textbox", "searchbox", "combobox", "checkbox", "switch", "spinbutton", "slider"}
# Names that do not say what they act on.
BARE = {"copy", "edit", "close", "delete", "rename", "remove", "apply", "ok", "cancel", "save", "send again",
        "reset", "more", "less", "+", "-", "−", "‹", "›", "x", "×", "on", "off"}


def test_every_control_is_named_for_what_it_acts_on(open_page, fake_server, monkeypatch):
    page = busy_page(open_page, fake_server, monkeypatch)
    session = page.context.new_cdp_session(page)
    nodes = session.send("Accessibility.getFullAXTree")["nodes"]
    controls = [(n["role"]["value"], (n.get("name") or {}).get("value", "").strip()) for n in nodes
                if not n.get("ignored") and n.get("role", {}).get("value") in ROLES]
    assert len(controls) > 30
    unnamed = [role for role, name in controls if not name]
    bare = [(role, name) for role, name in controls if name.lower() in BARE]
    assert unnamed == [] and bare == [], (unnamed, bare)
    names = {name for _, name in controls}
    for name in ("Copy answer", "Copy code", "Smaller draft block", "Larger draft block", "Less thinking",
                 "More thinking"):
        assert name in names, name
