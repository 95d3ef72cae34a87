"""XSS corpus in Chromium: payloads streamed in answers and in thinking (word by word, as the fake engine streams),
and sent as the user's own message, render as inert text or sanitized markup, live and after a reload."""

import pytest

from engines import fake

pytestmark = pytest.mark.browser

# Each would set window.__pwned (or the title) if it ran.
CORPUS = "\n\n".join([
    "<script>window.__pwned='script'</script>",
    '<img src="x" onerror="window.__pwned=\'img\'">',
    '<svg onload="window.__pwned=\'svg\'"><circle r="1"></circle></svg>',
    "<svg><script>window.__pwned='svg script'</script></svg>",
    '<iframe src="javascript:top.__pwned=\'iframe\'"></iframe>',
    '<iframe srcdoc="<script>parent.__pwned=\'srcdoc\'</script>"></iframe>',
    '<a href="javascript:window.__pwned=\'link\'">html link</a>',
    '<a href="JaVaScRiPt&colon;window.__pwned=\'entity\'">entity link</a>',
    '<a href="&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;:window.__pwned=\'hex\'">hex link</a>',
    "[markdown link](javascript:window.__pwned='md')",
    "[entity markdown link](&#106;avascript:window.__pwned='md2')",
    "[angle markdown link](<javascript:window.__pwned='md3'>)",
    "[reference link][evil]\n\n[evil]: javascript:window.__pwned='ref'",
    "![markdown image](javascript:window.__pwned='mdimg')",
    "<https://example.invalid/\"onmouseover=\"window.__pwned='autolink'>",
    '<a href="data:text/html;base64,PHNjcmlwdD5wYXJlbnQuX19wd25lZD0nZGF0YSc8L3NjcmlwdD4=">data link</a>',
    '<object data="javascript:window.__pwned=\'object\'"></object>',
    '<embed src="javascript:window.__pwned=\'embed\'">',
    '<div style="background:url(javascript:window.__pwned=\'css\')">styled</div>',
    '<div style="width: expression(window.__pwned=\'expression\')">expression</div>',
    "<style>body{background:url(\"javascript:window.__pwned='style'\")}</style>",
    '<math><mtext><table><mglyph><style><img src="x" onerror="window.__pwned=\'mxss\'">',
    '<noscript><p title="</noscript><img src=x onerror=window.__pwned=\'noscript\'>">',
    '<form><button formaction="javascript:window.__pwned=\'form\'">go</button></form>',
    '<details open ontoggle="window.__pwned=\'details\'">details</details>',
    '<input autofocus onfocus="window.__pwned=\'input\'">',
    '<body onload="window.__pwned=\'body\'">',
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=\'meta\'">',
    '<base href="javascript:/">',
    "<scr<script>ipt>window.__pwned='nested'</scr</script>ipt>",
    "&lt;script&gt;window.__pwned='escaped'&lt;/script&gt;",
    "<title>pwned</title>",
    "$\\href{javascript:window.__pwned='katex'}{math link}$ and $$\\url{javascript:window.__pwned='url'}$$",
])

# In the sanitized messages: no handler attribute, no script-capable tag, no script URL anywhere, and styles only
# where KaTeX lays out a formula (set through the CSSOM by static/js/sanitize.js), never with a URL.
OFFENDERS = """() => {
  const bad = [];
  const tags = new Set(["SCRIPT", "IFRAME", "OBJECT", "EMBED", "FRAME", "BASE", "META", "LINK", "STYLE", "FORM",
                        "TITLE", "NOSCRIPT"]);
  for (const el of document.querySelectorAll(".msg, .msg *")) {
    if (tags.has(el.tagName.toUpperCase())) bad.push(el.tagName);
    for (const attr of el.attributes) {
      const value = attr.value.replace(/[\\s\\u0000-\\u001f]/g, "").toLowerCase();
      if (attr.name.toLowerCase().startsWith("on") || attr.name.toLowerCase() === "srcdoc"
          || attr.name.toLowerCase() === "formaction"
          || (attr.name.toLowerCase() === "style" && (!el.closest(".katex, .katex-error") || /url|expression/.test(value)))
          || /^(javascript|vbscript|data:text)/.test(value) || value.includes("javascript:"))
        bad.push(`${el.tagName} ${attr.name}=${attr.value}`);
    }
  }
  return bad;
}"""


@pytest.fixture
def corpus_page(browser, fake_server, monkeypatch):
    monkeypatch.setattr(fake, "ANSWER", CORPUS)
    monkeypatch.setattr(fake, "THINKING", CORPUS.replace("\n\n", " "))
    fake_server.host.update_settings({"reasoning_budget": 2000, "max_tokens": 2000})
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    # A handler or script the sanitizer let through would be refused by the CSP, which logs it.
    page.on("console", lambda msg: msg.type == "error" and "Failed to load resource" not in msg.text
            and problems.append(msg.text))
    page.goto(fake_server.url + "/")
    page.wait_for_selector("#engine[data-state=ready]")
    yield page
    context.close()
    assert problems == []


def inert(page, title: str) -> None:
    state = page.evaluate("() => ({pwned: window.__pwned ?? null, title: document.title})")
    assert state == {"pwned": None, "title": title}
    assert page.evaluate(OFFENDERS) == []


def test_xss_corpus_in_answers_thinking_and_prompts_stays_inert(corpus_page):
    page = corpus_page
    title = page.title()
    page.fill("#prompt", CORPUS)
    page.press("#prompt", "Enter")
    page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=60_000)
    reply = page.locator(".msg.assistant").last
    reply.locator(".thinking summary").click()  # open, so its content is rendered and checked too
    answer = reply.locator(".answer").inner_text()
    # The payloads arrived: shown as text or as sanitized links, not dropped wholesale.
    assert "window.__pwned='escaped'" in answer and "html link" in answer and "markdown link" in answer
    assert "window.__pwned" in reply.locator(".thinking").inner_text()
    assert "window.__pwned='script'" in page.locator(".msg.user").last.inner_text()
    page.wait_for_timeout(500)  # long enough for an onload, onerror or autofocus to have fired
    inert(page, title)

    page.reload()  # the stored conversation, drawn again from the store
    page.wait_for_selector('.msg.assistant[data-state="done"]', timeout=30_000)
    page.wait_for_timeout(500)
    assert "html link" in page.locator(".msg.assistant .answer").last.inner_text()
    inert(page, title)
