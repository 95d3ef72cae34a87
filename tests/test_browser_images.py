"""Images in headless Chromium against the server on the fake engine (which says how many images it got and their
sizes): attached by pasting, dropping and the file picker, shown as thumbnails that can be removed, uploaded at
once, sent with the message, kept by a reload, an edit and a race, seen large; refused past eight, with the
server's message for a file it cannot read, and not at all on a model that cannot see."""

import base64
import hashlib
import io
import re

import pytest
import requests
from PIL import Image

from tests.support.browser import (collect_errors, done_count, evaluate, race, wait_for_frame, wait_race_done,
                                   wait_ready)

pytestmark = pytest.mark.browser

ID = re.compile(r"[0-9a-f]{32}")


def png(width: int, height: int, color=(200, 40, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format="PNG")
    return out.getvalue()


def attachment_id(data: bytes) -> str:
    """The id the server gives an image: its content's SHA-256, cut to 32 hex digits."""
    return hashlib.sha256(data).hexdigest()[:32]


def payload(*files: tuple[str, bytes] | tuple[str, bytes, str]) -> list[dict]:
    return [{"name": f[0], "b64": base64.b64encode(f[1]).decode(), "type": f[2] if len(f) > 2 else "image/png"}
            for f in files]


# Builds a DataTransfer holding Files made in the page from the bytes given, and dispatches `kind` on `target`
# carrying it: a paste's ClipboardEvent, or a drag's DragEvent. Returns whether the page took the event.
DISPATCH = """([kind, target, files]) => {
  const data = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
    data.items.add(new File([bytes], f.name, { type: f.type }));
  }
  const init = { bubbles: true, cancelable: true };
  const event = kind === 'paste' ? new ClipboardEvent('paste', { ...init, clipboardData: data })
    : new DragEvent(kind, { ...init, dataTransfer: data });
  return !document.querySelector(target).dispatchEvent(event);
}"""


def paste(page, *files) -> bool:
    return page.evaluate(DISPATCH, ["paste", "#prompt", payload(*files)])


def drop(page, *files) -> bool:
    return page.evaluate(DISPATCH, ["drop", "#prompt", payload(*files)])


def tray_ready(page, count: int) -> None:
    page.wait_for_function(
        "(n) => document.querySelectorAll('#attach-tray .attach-item[data-state=ready]').length === n"
        " && document.querySelectorAll('#attach-tray .attach-item').length === n", arg=count)


def served(server, id: str) -> bytes:
    reply = requests.get(f"{server.url}/api/attachments/{id}", timeout=5)
    assert reply.status_code == 200, reply.text
    return reply.content


def sent_chats(tab) -> list[dict]:
    return [f for f in tab.sent if f.get("type") == "chat"]


def answer(page, index: int = -1) -> str:
    return page.locator(".msg.assistant .answer").nth(index).inner_text()


def shown_images(page, selector: str = ".msg.user") -> list[str]:
    """The attachment ids the message's thumbnails show, once every one has loaded."""
    page.wait_for_function(f"() => [...document.querySelectorAll('{selector} .msg-image img')]"
                           ".every((img) => img.complete && img.naturalWidth > 0)")
    return page.locator(f"{selector} .msg-image img").evaluate_all(
        "(imgs) => imgs.map((img) => new URL(img.src).pathname.split('/').pop())")


def test_pasted_images_upload_at_once_and_go_with_the_message(tab):
    tab.open()
    page = tab.page
    wide, small = png(40, 30), png(20, 10, (20, 90, 200))
    page.evaluate("""() => {
      window.revoked = [];
      const revoke = URL.revokeObjectURL;
      URL.revokeObjectURL = (url) => { window.revoked.push(url); revoke.call(URL, url); };
    }""")
    page.fill("#prompt", "what are these?")
    assert paste(page, ("wide.png", wide), ("small.png", small))  # taken from the paste, not pasted as text
    tray_ready(page, 2)
    assert page.input_value("#prompt") == "what are these?"
    previews = page.locator("#attach-tray img").evaluate_all("(imgs) => imgs.map((img) => img.src)")
    assert all(src.startswith("blob:") for src in previews) and len(previews) == 2
    # Uploaded before anything is sent, each stored under its content's id.
    assert served(tab.server, attachment_id(wide)) == wide and served(tab.server, attachment_id(small)) == small
    assert sent_chats(tab) == []

    page.press("#prompt", "Enter")
    done_count(page, 1)
    chat = sent_chats(tab)[-1]
    assert chat["text"] == "what are these?" and chat["images"] == [attachment_id(wide), attachment_id(small)]
    assert answer(page).startswith("I got 2 images: 40×30 PNG, 20×10 PNG.")
    # The sent message shows them from the server; the tray is empty and its previews let go.
    assert shown_images(page) == [attachment_id(wide), attachment_id(small)]
    assert page.locator(".msg.user .bubble").inner_text() == "what are these?"
    assert page.locator("#attach-tray").is_hidden() and page.locator("#attach-tray li").count() == 0
    assert sorted(page.evaluate("() => window.revoked")) == sorted(previews)
    # Two images of 16 prompt tokens each, said beside the prompt's size.
    assert page.locator('.msg.assistant [data-stat="image_tokens"]').inner_text() == "32 image tokens"

    # Text pastes as text: the tray stays empty.
    assert page.evaluate("""() => {
      const data = new DataTransfer();
      data.setData('text/plain', 'words');
      return !document.querySelector('#prompt').dispatchEvent(
        new ClipboardEvent('paste', { bubbles: true, cancelable: true, clipboardData: data }));
    }""") is False
    assert page.locator("#attach-tray li").count() == 0


def test_dropped_images_can_be_removed_before_sending(tab):
    tab.open()
    page = tab.page
    first, second, third = png(12, 12), png(14, 14, (0, 120, 0)), png(16, 8, (0, 0, 160))
    # A drag of files over the composer marks it as the place to drop them.
    page.evaluate(DISPATCH, ["dragover", "#prompt", payload(("a.png", first))])
    assert page.get_attribute("#composer", "data-drag") == "true"
    assert drop(page, ("first.png", first), ("second.png", second), ("third.png", third))
    assert page.get_attribute("#composer", "data-drag") is None
    tray_ready(page, 3)
    assert page.locator("#attach-tray img").evaluate_all("(imgs) => imgs.map((img) => img.alt)") == \
        ["first.png", "second.png", "third.png"]

    page.get_by_role("button", name="Remove the image second.png").click()
    tray_ready(page, 2)
    # Focus moves on to the next image's remove button, so the keyboard can go on removing.
    assert page.evaluate("() => document.activeElement.getAttribute('aria-label')") == "Remove the image third.png"
    page.fill("#prompt", "two left")
    page.click("#send")
    done_count(page, 1)
    assert sent_chats(tab)[-1]["images"] == [attachment_id(first), attachment_id(third)]
    assert answer(page).startswith("I got 2 images: 12×12 PNG, 16×8 PNG.")
    assert shown_images(page) == [attachment_id(first), attachment_id(third)]


def test_the_file_picker_sends_an_image_alone_which_a_reload_keeps_and_shows_large(tab):
    tab.open()
    page = tab.page
    image = png(400, 300, (250, 200, 0))
    button = page.locator("#attach")
    assert button.get_attribute("aria-disabled") == "false"
    with page.expect_file_chooser() as chooser:
        button.click()
    chooser.value.set_files([{"name": "photo.png", "mimeType": "image/png", "buffer": image}])
    tray_ready(page, 1)
    assert page.locator("#send").is_enabled()  # images alone are a message
    page.click("#send")
    done_count(page, 1)
    chat = sent_chats(tab)[-1]
    assert chat["text"] == "" and chat["images"] == [attachment_id(image)]
    assert answer(page).startswith("I got 1 image: 400×300 PNG.")
    assert page.locator(".msg.user .bubble").is_hidden()  # no empty bubble under the image

    page.reload()
    done_count(page, 1)
    assert shown_images(page) == [attachment_id(image)]
    assert answer(page).startswith("I got 1 image: 400×300 PNG.")

    # The keyboard opens the large view; Escape closes it and gives focus back to the thumbnail.
    thumb = page.get_by_role("button", name="Show attached image large")
    thumb.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Attached image")
    dialog.wait_for()
    large = dialog.locator("img")
    assert large.evaluate("(img) => new URL(img.src).pathname") == f"/api/attachments/{attachment_id(image)}"
    page.wait_for_function("() => document.querySelector('#lightbox img').naturalWidth === 400")
    assert large.bounding_box()["width"] == 400  # whole, where the thumbnail is cut to 112 px
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert page.evaluate("() => document.activeElement.classList.contains('msg-image')")
    # A click opens it too, and a click beside the image closes it.
    thumb.click()
    dialog.wait_for()
    page.mouse.click(5, 5)
    dialog.wait_for(state="hidden")


def test_a_ninth_image_is_refused_and_a_file_the_server_cannot_read_says_why(open_page):
    open_page.expected.append("status of 400")  # the refused upload, which the browser logs
    page = open_page()
    images = [(f"i{n}.png", png(8 + n, 8)) for n in range(9)]
    paste(page, *images)
    tray_ready(page, 8)
    error = page.locator("#attach-error")
    assert "At most 8 images go with one message: “i8.png” was not attached." in error.inner_text()
    for n in range(8):
        page.get_by_role("button", name=f"Remove the image i{n}.png").click()
    tray_ready(page, 0)
    assert page.locator("#attach-tray").is_hidden()

    # A text file under an image's name: the server's own message, and nothing stays attached.
    paste(page, ("notes.png", b"these are not pixels"))
    page.wait_for_function("() => document.querySelector('#attach-error').textContent.includes('notes.png')")
    assert "“notes.png” could not be attached: The file is not an image specchat can read" in error.inner_text()
    tray_ready(page, 0)
    # A file that is no image at all is refused before any upload.
    paste(page, ("notes.txt", b"words", "text/plain"))
    assert "“notes.txt” is not an image specchat can read" in error.inner_text()
    page.get_by_role("button", name="Dismiss the image message").click()
    assert error.is_hidden()


def test_a_message_sent_while_an_image_uploads_waits_for_it(tab):
    tab.open()
    page = tab.page
    held = []
    page.route("**/api/attachments", lambda route: held.append(route))
    image = png(10, 20)
    paste(page, ("slow.png", image))
    page.wait_for_selector("#attach-tray .attach-item[data-state=uploading] progress")
    page.fill("#prompt", "after the upload")
    page.press("#prompt", "Enter")
    assert page.inner_text("#composer-hint") == "Sends once the images are uploaded…"
    page.wait_for_timeout(300)
    assert sent_chats(tab) == [] and len(held) == 1
    held[0].continue_()
    done_count(page, 1)
    assert sent_chats(tab)[-1]["images"] == [attachment_id(image)]
    assert answer(page).startswith("I got 1 image: 10×20 PNG.")


def test_edit_and_regenerate_keep_the_images_and_the_edit_can_leave_them_out(tab):
    tab.open()
    page = tab.page
    image = png(30, 30)
    paste(page, ("kept.png", image))
    tray_ready(page, 1)
    page.fill("#prompt", "first")
    page.press("#prompt", "Enter")
    done_count(page, 1)

    page.get_by_role("button", name="Regenerate answer").click()
    page.wait_for_function("() => document.querySelector('.msg.assistant .branch-count')?.textContent === '2/2'")
    done_count(page, 1)
    assert answer(page).startswith("I got 1 image: 30×30 PNG.")

    page.locator(".msg.user").hover()
    page.get_by_role("button", name="Edit message").click()
    assert page.locator(".edit-form img").count() == 1
    page.fill(".edit-text", "second")
    page.get_by_role("button", name="Send edit").click()
    page.wait_for_function("() => document.querySelector('.msg.user .bubble').textContent === 'second'")
    done_count(page, 1)
    edit = sent_chats(tab)[-1]
    assert edit["text"] == "second" and edit["images"] == [attachment_id(image)] and "parent" in edit
    assert answer(page).startswith("I got 1 image: 30×30 PNG.")
    assert shown_images(page) == [attachment_id(image)]

    page.locator(".msg.user").hover()
    page.get_by_role("button", name="Edit message").click()
    page.get_by_role("button", name="Leave attached image out of the edit").click()
    assert page.locator(".edit-form img").count() == 0
    page.get_by_role("button", name="Send edit").click()
    page.wait_for_function("() => document.querySelector('.msg.user .branch-count')?.textContent === '3/3'")
    done_count(page, 1)
    assert "images" not in sent_chats(tab)[-1]
    assert not answer(page).startswith("I got") and page.locator(".msg.user .msg-image").count() == 0


def test_a_race_with_an_image_runs_every_lane_on_it(tab):
    tab.open()
    page = tab.page
    image = png(24, 12)
    paste(page, ("race.png", image))
    tray_ready(page, 1)
    since = len(tab.frames)
    view = race(tab, "describe it", 1)
    wait_for_frame(tab, "race_done", since, timeout_ms=30_000)
    wait_race_done(tab)
    frame = next(f for f in tab.sent if f.get("type") == "race")
    assert frame["text"] == "describe it" and frame["images"] == [attachment_id(image)]
    for lane in ("off", "on"):
        assert view.locator(f".race-lane[data-lane={lane}] .lane-answer").inner_text().startswith(
            "I got 1 image: 24×12 PNG.")
    assert shown_images(page) == [attachment_id(image)]
    assert page.locator("#attach-tray li").count() == 0

    # A block sweep too: every block's runs answer about the same image.
    other = png(6, 18)
    paste(page, ("sweep.png", other))
    tray_ready(page, 1)
    page.fill("#prompt", "and this?")
    page.get_by_role("button", name="Find the best block size").click()
    page.wait_for_selector('.msg.sweep[data-state="done"]', timeout=60_000)
    sweep = next(f for f in tab.sent if f.get("type") == "sweep")
    assert sweep["images"] == [attachment_id(other)]
    said: dict[int | str, str] = {}
    for f in tab.frames:
        if f.get("type") == "answer" and f.get("id") == sweep["id"] and f.get("run") == 0:
            said[f["block"]] = said.get(f["block"], "") + f["text"]
    assert set(said) == {1, 2, 3, 4, 5, 6, "auto"}
    assert all(text.startswith("I got 1 image: 6×18 PNG.") for text in said.values()), said
    assert shown_images(page, ".msg.user:has(+ .msg.sweep)") == [attachment_id(other)]


def test_a_model_that_cannot_see_disables_attaching_and_says_why(tab):
    tab.server.engine.vision = False
    uploads = []
    tab.page.on("request", lambda request: "/api/attachments" in request.url and uploads.append(request.url))
    tab.open()
    page = tab.page
    button = page.locator("#attach")
    assert button.get_attribute("aria-disabled") == "true"
    note = "The fake model is set up blind: it cannot see images."
    assert note in button.get_attribute("title") and note in button.get_attribute("aria-description")
    error = page.locator("#attach-error")
    # Still focusable, so that pressing it says why instead of nothing; no file chooser opens.
    chooser = []
    page.on("filechooser", lambda opened: chooser.append(opened))
    button.focus()
    page.keyboard.press("Enter")
    assert error.inner_text().startswith(f"Images cannot be attached: {note}")
    page.get_by_role("button", name="Dismiss the image message").click()
    # Pasting or dropping an image attaches nothing and says why.
    assert paste(page, ("a.png", png(8, 8)))
    assert note in error.inner_text()
    page.get_by_role("button", name="Dismiss the image message").click()
    assert drop(page, ("b.png", png(8, 8)))
    assert note in error.inner_text()
    page.wait_for_timeout(200)
    assert uploads == [] and chooser == [] and page.locator("#attach-tray li").count() == 0

    # A model that can see enables it.
    tab.server.engine.vision = True
    page.reload()
    page.wait_for_selector("#engine[data-state=ready]")
    page.wait_for_selector('#attach[aria-disabled="false"]')
    assert "Attach images (up to 8)" in button.get_attribute("title") and button.get_attribute("aria-description") is None


def test_the_stats_split_the_time_to_first_token_and_count_image_tokens(tab):
    tab.open()
    render = """(m, stats) => {
      const el = document.createElement('div');
      m.renderStats(el, stats, false);
      return [...el.querySelectorAll('.stat')].map((chip) => [chip.dataset.stat, chip.textContent, chip.title]);
    }"""
    chips = evaluate(tab, "stats.js", render, {"ttft_ms": 1500, "vision_ms": 900, "prefill_ms": 450,
                                               "image_tokens": 256, "prompt_tokens": 300})
    split = "vision 900 ms · prefill 450 ms · first token 150 ms"
    assert ["ttft", f"TTFT 1.5 s ({split})", f"Time to first token: {split}"] in chips
    assert ["image_tokens", "256 image tokens", "Prompt tokens the attached images took"] in chips
    # Without the parts (an engine that does not time them), the time alone; no images, no image chip.
    chips = evaluate(tab, "stats.js", render, {"ttft_ms": 1500, "vision_ms": None, "prefill_ms": None,
                                               "image_tokens": 0})
    assert chips == [["ttft", "TTFT 1.5 s", "Time to first token"]]
    chips = evaluate(tab, "stats.js", render, {"ttft_ms": 500, "vision_ms": None, "prefill_ms": 420})
    assert chips[0][1] == "TTFT 500 ms (prefill 420 ms · first token 80 ms)"


def test_the_bundled_demo_model_cannot_see_and_its_attach_button_says_why(browser, start_server):
    server = start_server()
    engine = server.wait_ready()
    assert engine["vision"] is False and engine["vision_note"]
    context = browser.new_context()
    try:
        page = context.new_page()
        errors = []
        collect_errors(page, errors)
        page.goto(server.url + "/")
        wait_ready(page, 60_000)
        button = page.locator("#attach")
        assert button.get_attribute("aria-disabled") == "true"
        assert button.get_attribute("title") == f"Cannot attach images: {engine['vision_note']}"
        assert errors == []
    finally:
        context.close()
