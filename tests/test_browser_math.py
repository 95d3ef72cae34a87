"""LaTeX in answers and thinking, rendered with KaTeX in headless Chromium under the page's CSP: formulas
render once closed, prices stay text, a formula still streaming stays text, and TeX cannot inject markup."""

import pytest
import requests

import engines.fake

pytestmark = pytest.mark.browser

ANSWER = ("Inline $x^2 + y^2 = z^2$ and \\(a_1 + b_1\\) in a sentence, prices $5 and $10 stay text.\n\n"
          "$$\n\\int_0^1 x \\, dx = \\frac{1}{2}\n$$\n\n"
          "Also \\[ \\sqrt{2} \\approx 1.414 \\] shown, and `$not math$` in code.")
THINKING = "I recall $E = mc^2$ here and \\(\\alpha\\) too . "


def settings(server, **values) -> None:
    response = requests.post(f"{server.url}/api/settings", json=values, timeout=5)
    assert response.status_code == 200, response.text


def finished(page, count: int = 1) -> None:
    page.wait_for_function(
        f"() => document.querySelectorAll('.msg.assistant[data-state=\"done\"]').length === {count}", timeout=15_000)


def send(page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def test_answers_and_thinking_render_their_formulas(open_page, fake_server, monkeypatch):
    monkeypatch.setattr(engines.fake, "ANSWER", ANSWER)
    monkeypatch.setattr(engines.fake, "THINKING", THINKING)
    settings(fake_server, reasoning_budget=64)
    page = open_page()
    send(page, "some maths please")
    finished(page)
    answer = page.locator(".msg.assistant .answer")
    # Four formulas: two inline, the display block and the bracketed display; prices and code are text.
    assert answer.locator(".katex").count() == 4
    assert answer.locator(".katex-display").count() == 2
    assert answer.locator(".math-block .katex-display").count() == 1
    text = answer.inner_text()
    assert "prices $5 and $10 stay text" in text
    assert answer.locator("code").filter(has_text="$not math$").count() == 1
    # MathML stays for screen readers; the TeX source annotation does not leak as text.
    assert answer.locator("math").count() == 4
    assert answer.locator("annotation").count() == 0
    # KaTeX's layout styles apply (set through the CSSOM; the CSP refuses style attributes in markup),
    # and its own font is used.
    assert answer.locator(".katex .katex-strut").first.evaluate("e => e.style.height") != ""
    assert "KaTeX_Main" in answer.locator(".katex").first.evaluate("e => getComputedStyle(e).fontFamily")
    assert answer.locator("[data-math-style]").count() == 0
    page.wait_for_function("() => document.fonts.check('1em KaTeX_Main')")

    thinking = page.locator(".msg.assistant .thinking-body")
    assert thinking.locator(".katex").count() == 2
    assert "I recall" in thinking.text_content() and "here and" in thinking.text_content()


def test_a_formula_still_streaming_stays_text(open_page, fake_server, monkeypatch):
    monkeypatch.setattr(engines.fake, "ANSWER", "The area is $\\pi r^2$ for a circle.")
    settings(fake_server, reasoning_budget=0, speculative=False)
    fake_server.engine.holds = [4]  # "The area is $\pi" sent, "r^2$" not yet
    page = open_page()
    send(page, "area of a circle")
    answer = page.locator(".msg.assistant .answer")
    page.wait_for_function("() => document.querySelector('.msg.assistant .answer')?.textContent.includes('$\\\\pi')")
    assert answer.locator(".katex").count() == 0
    fake_server.engine.resume()
    finished(page)
    assert answer.locator(".katex").count() == 1
    assert "$" not in answer.inner_text()


def test_tex_cannot_inject_markup(open_page, fake_server, monkeypatch):
    monkeypatch.setattr(engines.fake, "ANSWER", (
        "$\\href{javascript:alert(1)}{click}$ and $<img src=x onerror=alert(1)>$ and "
        "$\\htmlStyle{color:red}{x}$ and $\\color{red}{y}$"))
    settings(fake_server, reasoning_budget=0)
    page = open_page()
    send(page, "try to break out")
    finished(page)
    answer = page.locator(".msg.assistant .answer")
    assert answer.locator("img, script, [onerror], a[href^='javascript']").count() == 0
    assert answer.locator(".katex").count() == 4
    # Untrusted commands are shown as their source in the theme's error colour, not obeyed.
    danger = page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--danger').trim()")
    shown = answer.locator(".katex .mord.text").evaluate_all(
        "els => els.map(e => [e.textContent, getComputedStyle(e).color])")
    assert [text for text, _ in shown] == ["\\href", "\\htmlStyle"]
    assert {color for _, color in shown} == {page.evaluate(
        "c => { const s = document.createElement('span'); s.style.color = c; document.body.append(s);"
        " const v = getComputedStyle(s).color; s.remove(); return v; }", danger)}
    # \color is obeyed, styled through the CSSOM.
    assert answer.locator(".katex").nth(3).locator("[style*='color']").count() >= 1
