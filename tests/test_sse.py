"""The shared SSE client on canned responses: what is skipped, what ends a stream, how errors read."""

import threading

import httpx
import pytest

from engines import EngineError
from engines.sse import open_event_stream

URL = "http://server.test/v1/chat/completions"


def client_for(status: int, body, content_type: str = "text/event-stream") -> httpx.Client:
    def handler(request):
        content = iter(body) if isinstance(body, list) else body
        return httpx.Response(status, headers={"Content-Type": content_type}, content=content)

    return httpx.Client(transport=httpx.MockTransport(handler))


def chunks(lines: list[bytes]) -> tuple[list, object]:
    stream = open_event_stream(client_for(200, lines), URL, {}, {}, "The server", stall_s=2)
    got = list(stream.chunks(threading.Event()))
    stream.close()
    return got, stream


def test_comments_fields_and_malformed_lines_are_skipped():
    got, stream = chunks([
        b": keepalive 1/20\n\n", b"event: message\nid: 7\nretry: 100\n",
        b'data: {"a": 1}\n\n', b"data: {broken\n\n", b"data: [1, 2]\n\n", b'data:{"b": 2}\n\n',
        b"data: [DONE]\n\n", b'data: {"after": "done"}\n\n',
    ])
    assert got == [{"a": 1}, {"b": 2}]
    assert stream.skipped == 2 and stream.done


def test_a_data_line_split_across_reads():
    got, _ = chunks([b'data: {"text": "hel', b'lo"}\n', b"\n", b"data: [DONE]\n\n"])
    assert got == [{"text": "hello"}]


def test_end_of_body_without_done():
    got, stream = chunks([b'data: {"a": 1}\n\n'])
    assert got == [{"a": 1}] and not stream.done


@pytest.mark.parametrize("body,detail", [
    (b'{"error": {"message": "messages must not be empty", "type": "invalid_request_error"}}',
     "messages must not be empty"),
    (b'{"detail": [{"loc": ["body", "model"], "msg": "Field required"}]}', "body.model: Field required"),
    (b'{"detail": "Not Found"}', "Not Found"),
    (b"plain text failure", "plain text failure"),
])
def test_error_bodies_are_quoted(body, detail):
    with pytest.raises(EngineError) as caught:
        open_event_stream(client_for(422, body, "application/json"), URL, {}, {}, "The server", stall_s=2)
    assert caught.value.code == "invalid_request" and f"({detail})" in caught.value.message
