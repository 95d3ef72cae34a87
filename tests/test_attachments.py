"""Images: uploaded and checked (Pillow), served back, sent with chats and races, stored with the conversation,
freed with it, exported and imported byte for byte; bad input refused with a message and the tab goes on."""

import io
import signal
import socket
import sqlite3

import pytest
import requests
from PIL import Image

from engines.fake import IMAGE_WORDS
from tests.support.wsclient import WsClient, texts
from webapp.conversations.images import MAX_BYTES, MAX_PIXELS
from webapp.conversations.store import Store


def picture(size=(64, 48), kind="PNG", color=(200, 30, 30), **save) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=kind, **save)
    return out.getvalue()


def upload(server, data: bytes, mime: str = "image/png", multipart: bool = False) -> requests.Response:
    url = server.url + "/api/attachments"
    if multipart:
        return requests.post(url, files={"file": ("a.bin", data, mime)}, timeout=30)
    return requests.post(url, data=data, headers={"Content-Type": mime}, timeout=30)


def attach(server, data: bytes, mime: str = "image/png") -> dict:
    response = upload(server, data, mime)
    assert response.status_code == 200, response.text
    return response.json()["attachment"]


def api(server, method, path, **kwargs):
    return requests.request(method, server.url + "/api" + path, timeout=10, **kwargs)


def test_an_upload_is_checked_stored_once_and_served_back(fake_server):
    data = picture()
    raw = upload(fake_server, data).json()
    assert raw["ok"] is True
    got = raw["attachment"]
    assert set(got) == {"id", "sha256", "mime", "width", "height", "bytes"}
    assert (got["mime"], got["width"], got["height"], got["bytes"]) == ("image/png", 64, 48, len(data))
    again = upload(fake_server, data, "image/png", multipart=True).json()["attachment"]
    assert again == got  # derived from the content: the same image is stored once
    other = attach(fake_server, picture(color=(0, 0, 255)))
    assert other["id"] != got["id"]
    served = api(fake_server, "GET", f"/attachments/{got['id']}")
    assert served.status_code == 200 and served.content == data
    assert served.headers["Content-Type"] == "image/png"
    assert served.headers["X-Content-Type-Options"] == "nosniff"
    assert "max-age=31536000" in served.headers["Cache-Control"]
    cached = api(fake_server, "GET", f"/attachments/{got['id']}", headers={"If-None-Match": served.headers["ETag"]})
    assert cached.status_code == 304
    missing = api(fake_server, "GET", "/attachments/" + "0" * 32)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_attachment"


@pytest.mark.parametrize("kind, mime, save", [
    ("JPEG", "image/jpeg", {}), ("WEBP", "image/webp", {}), ("BMP", "image/bmp", {}), ("GIF", "image/gif", {}),
])
def test_each_kind_is_read_from_its_content_not_the_header(fake_server, kind, mime, save):
    got = attach(fake_server, picture(kind=kind, **save), "image/png")  # the header says PNG: the bytes win
    assert (got["mime"], got["width"], got["height"]) == (mime, 64, 48)


def test_a_gif_is_taken_by_its_first_frame(fake_server):
    frames = [Image.new("RGB", (20, 10), c) for c in ((255, 0, 0), (0, 255, 0))]
    out = io.BytesIO()
    frames[0].save(out, format="GIF", save_all=True, append_images=frames[1:])
    got = attach(fake_server, out.getvalue(), "image/gif")
    assert (got["mime"], got["width"], got["height"]) == ("image/gif", 20, 10)


def test_a_jpeg_rotated_by_exif_is_stored_upright(fake_server):
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° clockwise to display
    got = attach(fake_server, picture((64, 48), "JPEG", exif=exif.tobytes()), "image/jpeg")
    assert (got["width"], got["height"]) == (48, 64)
    stored = Image.open(io.BytesIO(api(fake_server, "GET", f"/attachments/{got['id']}").content))
    assert stored.size == (48, 64) and stored.getexif().get(0x0112, 1) == 1


def truncated_png() -> bytes:
    data = picture((300, 300), color=(1, 2, 3))
    noisy = Image.frombytes("RGB", (300, 300), bytes(range(256)) * 1054 + bytes(276))
    out = io.BytesIO()
    noisy.save(out, format="PNG")
    data = out.getvalue()
    return data[: len(data) // 2]


@pytest.mark.parametrize("data, mime, code, status, says", [
    (b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>', "image/svg+xml", "bad_image", 400, "SVG"),
    (b"just some notes, renamed to .png\n", "image/png", "bad_image", 400, "not an image"),
    (truncated_png(), "image/png", "bad_image", 400, "could not be decoded"),
    (b"", "image/png", "bad_image", 400, "empty"),
    (picture((8000, 6000), color=(0, 0, 0)), "image/png", "image_too_large", 413, "megapixels"),
    (picture(), "text/plain", "bad_image", 400, "Content-Type"),
])
def test_bad_input_is_refused_with_what_to_do(fake_server, data, mime, code, status, says):
    assert 8000 * 6000 > MAX_PIXELS
    response = upload(fake_server, data, mime)
    assert response.status_code == status
    body = response.json()
    assert body["ok"] is False and body["error"]["code"] == code
    assert says in body["error"]["message"]
    assert attach(fake_server, picture())["width"] == 64  # the server goes on


def test_more_than_20_mb_is_refused_before_it_is_read(fake_server):
    response = upload(fake_server, b"\x89PNG" + bytes(MAX_BYTES + 100_000))
    assert response.status_code == 413 and response.json()["error"]["code"] == "image_too_large"


def test_a_chat_with_images_reaches_the_engine_and_is_stored(fake_server):
    red, blue = attach(fake_server, picture()), attach(fake_server, picture((10, 12), "JPEG"), "image/jpeg")
    with WsClient(fake_server.ws_url) as ws:
        assert ws.hello["engine"]["vision"] is True
        done, frames = ws.chat("m1", "What is in these?", images=[red["id"], blue["id"]])
        assert texts(frames, "answer").startswith("I got 2 images: 64×48 PNG, 10×12 JPEG.")
        assert done["stats"]["image_tokens"] == 2 * IMAGE_WORDS
        seen = fake_server.engine.turns[-1].messages[-1]
        assert [i.data for i in seen.images] == [picture(), api(fake_server, "GET", f"/attachments/{blue['id']}").content]
        done, frames = ws.chat("m2", "And now?")  # the history keeps the images, the new message has none
        assert not texts(frames, "answer").startswith("I got")
        assert [len(m.images) for m in fake_server.engine.turns[-1].messages] == [2, 0, 0]
        conversation = ws.hello["conversation"]
    stored = api(fake_server, "GET", f"/conversations/{conversation}").json()["messages"]
    assert [m["images"] for m in stored] == [[red["id"], blue["id"]], [], [], []]


def test_images_alone_make_a_message(fake_server):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        done, frames = ws.chat("m1", "", images=[red["id"]])
        assert done["finish_reason"] == "stop" and texts(frames, "answer").startswith("I got 1 image: 64×48 PNG.")


def test_regenerate_edit_and_continue_keep_the_images(fake_server):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        done, _ = ws.chat("m1", "Look", images=[red["id"]])
        ws.send({"type": "regenerate", "id": "r1"})
        _, frames = ws.until("done", id="r1")
        assert texts(frames, "answer").startswith("I got 1 image")
        assert fake_server.engine.turns[-1].messages[-1].images[0].id == red["id"]
        fake_server.engine.holds = [3]
        ws.send({"type": "regenerate", "id": "r2"})
        ws.until("stats", id="r2")
        ws.send({"type": "stop", "id": "r2"})
        ws.until("done", id="r2")
        ws.send({"type": "continue", "id": "c1"})
        _, frames = ws.until("done", id="c1")
        assert [len(m.images) for m in fake_server.engine.turns[-1].messages] == [1, 0]


@pytest.mark.parametrize("frame, code, says", [
    ({"images": ["f" * 32]}, "unknown_attachment", "f" * 32),
    ({"images": ["nope"]}, "bad_frame", "images.0"),
    ({"images": [str(n) * 32 for n in range(9)]}, "bad_frame", "at most 8"),
    ({"text": ""}, "bad_frame", "send some text, images, or both"),
])
def test_a_chat_naming_a_bad_image_is_refused_before_anything_runs(fake_server, frame, code, says):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "chat", "id": "m1", "text": "hi", **frame})
        error = ws.until("error")[0]
        assert error["code"] == code and says in error["message"] and error["id"] == "m1"
        assert fake_server.engine.turns == []
        done, _ = ws.chat("m2", "still here?")
        assert done["finish_reason"] == "stop"
        conversation = ws.hello["conversation"]
    stored = api(fake_server, "GET", f"/conversations/{conversation}").json()["messages"]
    assert [m["content"] for m in stored] == ["still here?", stored[1]["content"]]


def test_a_model_that_cannot_see_refuses_images_with_the_fix(fake_server):
    red = attach(fake_server, picture())
    fake_server.engine.vision = False
    with WsClient(fake_server.ws_url) as ws:
        assert ws.hello["engine"]["vision"] is False and ws.hello["engine"]["vision_note"]
        ws.send({"type": "chat", "id": "m1", "text": "Look", "images": [red["id"]]})
        error = ws.until("error")[0]
        assert error["code"] == "no_vision" and "cannot see" in error["message"]
        ws.send({"type": "race", "id": "r1", "text": "Look", "images": [red["id"]]})
        assert ws.until("error")[0]["code"] == "no_vision"
        assert ws.chat("m2", "text only")[0]["finish_reason"] == "stop"
    assert api(fake_server, "GET", "/health").json()["engine"]["vision"] is False


def test_a_chat_with_images_goes_on_text_only_on_a_model_that_cannot_see(fake_server):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "Look", images=[red["id"]])
        fake_server.engine.vision = False  # as after a switch to a model without a vision tower
        done, _ = ws.chat("m2", "And in words?")
        assert done["finish_reason"] == "stop"
        assert [m.images for m in fake_server.engine.turns[-1].messages] == [(), (), ()]
        ws.send({"type": "regenerate", "id": "r1", "message": done["message"]})
        assert ws.until("done", id="r1")[0]["finish_reason"] == "stop"
        ws.send({"type": "chat", "id": "m3", "text": "This one?", "images": [red["id"]]})
        assert ws.until("error")[0]["code"] == "no_vision"


def test_a_race_runs_every_lane_on_the_same_images(fake_server):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "r1", "text": "Race on this", "images": [red["id"]], "runs": 1})
        summary, frames = ws.until("race_done", id="r1", timeout=60)
        assert summary["finish_reason"] == "stop"
        lanes = {f["lane"] for f in frames if f["type"] == "start"}
        assert len(lanes) == 2
        for lane in lanes:
            said = "".join(f["text"] for f in frames if f["type"] == "answer" and f.get("lane") == lane)
            assert said.startswith("I got 1 image: 64×48 PNG.")
        conversation = ws.hello["conversation"]
    stored = api(fake_server, "GET", f"/conversations/{conversation}").json()["messages"]
    assert stored[0]["images"] == [red["id"]]
    receipt = api(fake_server, "GET", "/receipts/r1").json()["receipt"]
    assert receipt["images"] == [{"id": red["id"], "mime": "image/png", "width": 64, "height": 48}]
    assert f"--image {red['id']}.png" in receipt["command"]
    markdown = api(fake_server, "GET", "/receipts/r1", params={"format": "markdown"}).text
    assert f"/api/attachments/{red['id']} as {red['id']}.png" in markdown


def test_a_sweep_runs_every_block_on_the_same_images(fake_server):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "sweep", "id": "s1", "text": "", "images": [red["id"]], "blocks": [1, 2], "runs": 1})
        summary, frames = ws.until("sweep_done", id="s1", timeout=60)
        assert summary["finish_reason"] == "stop"
        for block in (1, 2):
            said = "".join(f["text"] for f in frames if f["type"] == "answer" and f.get("block") == block)
            assert said.startswith("I got 1 image: 64×48 PNG.")
    assert api(fake_server, "GET", "/receipts/s1").json()["receipt"]["images"][0]["id"] == red["id"]


def test_image_tokens_count_towards_the_context(fake_server):
    red = attach(fake_server, picture())
    fake_server.engine.context_words = IMAGE_WORDS * 3
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "one", images=[red["id"]])
        ws.chat("m2", "two", images=[red["id"]])
        done, frames = ws.chat("m3", "three", images=[red["id"]])
        start = next(f for f in frames if f["type"] == "start")
        assert start["dropped_turns"] >= 1  # older turns and their images went, the prompt fits
        assert done["finish_reason"] == "stop"


def test_deleting_a_conversation_frees_only_the_images_nothing_else_holds(fake_server):
    shared, own = attach(fake_server, picture()), attach(fake_server, picture(color=(9, 9, 9)))
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "both", images=[shared["id"], own["id"]])
        first = ws.hello["conversation"]
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "one", images=[shared["id"]])
    pending = attach(fake_server, picture(color=(7, 7, 7)))  # uploaded, not yet sent
    assert api(fake_server, "DELETE", f"/conversations/{first}").status_code == 204
    assert api(fake_server, "GET", f"/attachments/{own['id']}").status_code == 404
    assert api(fake_server, "GET", f"/attachments/{shared['id']}").status_code == 200
    assert api(fake_server, "GET", f"/attachments/{pending['id']}").status_code == 200


def test_an_image_uploaded_again_for_a_new_message_outlives_the_old_conversation(fake_server):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "first", images=[red["id"]])
        first = ws.hello["conversation"]
    attach(fake_server, picture())  # the same image, attached again in a composer
    assert api(fake_server, "DELETE", f"/conversations/{first}").status_code == 204
    assert api(fake_server, "GET", f"/attachments/{red['id']}").status_code == 200


def test_export_embeds_the_images_and_import_restores_them_byte_for_byte(fake_server):
    data = picture((33, 21), "WEBP")
    red = attach(fake_server, data, "image/webp")
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "Keep this", images=[red["id"]])
        conversation = ws.hello["conversation"]
    export = api(fake_server, "GET", f"/conversations/{conversation}/export").json()
    assert set(export["attachments"]) == {red["id"]}
    markdown = api(fake_server, "GET", f"/conversations/{conversation}/export", params={"format": "markdown"}).text
    assert f"![image 1](/api/attachments/{red['id']})" in markdown
    assert api(fake_server, "DELETE", f"/conversations/{conversation}").status_code == 204
    assert api(fake_server, "GET", f"/attachments/{red['id']}").status_code == 404
    created = api(fake_server, "POST", "/conversations/import", json=export)
    assert created.status_code == 201, created.text
    restored = api(fake_server, "GET", f"/conversations/{created.json()['id']}").json()
    assert restored["messages"][0]["images"] == [red["id"]]
    assert api(fake_server, "GET", f"/attachments/{red['id']}").content == data


@pytest.mark.parametrize("change, says", [
    (lambda e, id: e["attachments"].clear(), "attachments does not hold"),
    (lambda e, id: e["attachments"][id].update(data="!!"), "not base64"),
    (lambda e, id: e["attachments"][id].update(sha256="0" * 64), "other bytes"),
    (lambda e, id: e["attachments"][id].update(data="aGVsbG8="), "not an image"),
])
def test_an_import_with_broken_images_is_refused_whole(fake_server, change, says):
    red = attach(fake_server, picture())
    with WsClient(fake_server.ws_url) as ws:
        ws.chat("m1", "Keep this", images=[red["id"]])
        conversation = ws.hello["conversation"]
    export = api(fake_server, "GET", f"/conversations/{conversation}/export").json()
    change(export, red["id"])
    before = api(fake_server, "GET", "/conversations").json()["conversations"]
    response = api(fake_server, "POST", "/conversations/import", json=export)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_import"
    assert says in response.json()["error"]["message"]
    assert api(fake_server, "GET", "/conversations").json()["conversations"] == before


def test_a_server_killed_mid_upload_leaves_nothing_half_written(start_server, tmp_path):
    data_dir = tmp_path / "kept"
    server = start_server("--engine", "fake", data_dir=data_dir)
    server.wait_ready()
    body = picture((400, 400), color=(5, 6, 7))
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(f"POST /api/attachments HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: image/png\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body[: len(body) // 2])
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=10)
    db = sqlite3.connect(data_dir / "specchat.db")
    assert db.execute("SELECT count(*) FROM attachments").fetchone() == (0,)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    again = start_server("--engine", "fake", data_dir=data_dir)
    again.wait_ready()
    assert attach(again, body)["bytes"] == len(body)


def test_the_store_refuses_a_message_naming_an_image_it_does_not_hold(tmp_path):
    from webapp.conversations.conversation import new_message

    store = Store(tmp_path)
    with pytest.raises(sqlite3.IntegrityError):
        store.add("c1", [new_message("user", None, "x", images=["a" * 32])], current="m")
    assert store.search() == []
