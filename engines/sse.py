"""One streaming client for OpenAI-compatible chat servers: HTTP errors mapped, SSE read defensively.

The response is read on its own thread into a queue, so the consumer can stop
within one poll interval even while the server sends nothing (prefill), and
can tell a stalled stream from a slow one by the time since the last byte.
"""

from __future__ import annotations

import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Iterator
from html import unescape

import httpx
import orjson

from .errors import EngineError

log = logging.getLogger(__name__)
POLL_S = 0.05
ERROR_BODY_LIMIT = 4096
DETAIL_LIMIT = 300  # characters of a server's error message shown to the user
IMAGES_HINT = ("If its model cannot see images, load one that can there; otherwise remove the images or send "
               "smaller ones, then send again.")


def as_text(text: str, limit: int = DETAIL_LIMIT) -> str:
    """A server's words as one short line of plain text: control characters and runs of white space
    become one space, and past ``limit`` characters it is cut with an ellipsis."""
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def html_text(html: str) -> str:
    """The visible text of an HTML error page (a proxy's 502, say), without its markup."""
    html = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>", " ", html)
    return unescape(re.sub(r"<[^>]*>", " ", html))


def error_detail(response: httpx.Response) -> str:
    """The server's own words from an error body (OpenAI envelope, FastAPI detail, or text), as text."""
    try:
        body = response.read()[:ERROR_BODY_LIMIT]
    except httpx.HTTPError:
        return ""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace")
        html = "html" in response.headers.get("Content-Type", "") or text.lstrip().startswith("<")
        return as_text(html_text(text) if html else text)
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("code") or err
        if isinstance(err, list) and err and isinstance(err[0], dict):
            err = "; ".join(f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg', '')}" for e in err)
        if err is not None:
            return as_text(str(err))
    return as_text(str(data))


def http_error(status: int, detail: str, server: str, retry_after: str | None = None,
               images: bool = False) -> EngineError:
    """An HTTP error before streaming, as a message that says what to do next. ``images``: the request carried
    images, so a refusal is most likely of them (a model that cannot see, an image too large or of a type the
    server does not take)."""
    said = f" ({detail})" if detail else ""
    if images and status in (400, 413, 415, 422):
        return EngineError(f"{server} refused the message with its images{said}. {IMAGES_HINT}", "images_refused")
    if status == 400:
        return EngineError(f"{server} rejected the request{said}. Change the settings or the message, then send again.",
                           "bad_request")
    if status in (401, 403):
        return EngineError(f"{server} refused the API key{said}. Check --api-key (or the key the server expects), "
                           "then restart specchat.", "unauthorized")
    if status == 404:
        return EngineError(f"{server} has no chat endpoint here{said}. Check --base-url: it must be the server's "
                           "/v1 address.", "not_found")
    if status == 409:
        return EngineError(f"{server} is still busy with a reply in this conversation{said}. Wait a moment, "
                           "then send again.", "conflict")
    if status == 422:
        return EngineError(f"{server} could not read the request{said}. Check the settings, then send again.",
                           "invalid_request")
    if status == 429:
        wait = f"{retry_after} s" if retry_after else "a moment"
        return EngineError(f"{server} is rate-limiting requests{said}. Wait {wait}, then send again.", "rate_limited")
    if status == 503:
        return EngineError(f"{server} is busy or still starting{said}. Wait a moment, then send again.",
                           "unavailable")
    if status == 507:
        return EngineError(f"{server} has not enough memory for this prompt{said}. Start a new chat or shorten "
                           "the conversation.", "insufficient_memory")
    return EngineError(f"{server} failed with HTTP {status}{said}. See the server's log, then send again.",
                       "server_error")


def connect_error(exc: httpx.HTTPError, url: str) -> EngineError:
    return EngineError(f"Cannot reach {url} ({type(exc).__name__}: {exc}). Start the server or check --base-url, "
                       "then send again.", "unreachable")


class EventStream:
    """An open ``text/event-stream`` response yielding each ``data:`` JSON object.

    Comment lines (``: keep-alive``), other fields and blank lines are skipped;
    a data line that is not a JSON object is skipped and counted in ``skipped``.
    """

    def __init__(self, response: httpx.Response, server: str, stall_s: float):
        self.response = response
        self.server = server
        self.stall_s = stall_s
        self.skipped = 0
        self.done = False  # saw [DONE]
        self._lines: queue.SimpleQueue = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, name="sse-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for line in self.response.iter_lines():
                self._lines.put(("line", line))
            self._lines.put(("end", None))
        except Exception as exc:  # the consumer decides what a broken stream means
            self._lines.put(("error", exc))

    def chunks(self, cancel: threading.Event) -> Iterator[dict]:
        """Chunks until ``[DONE]``, the end of the body, or ``cancel`` (checked every POLL_S)."""
        deadline = time.monotonic() + self.stall_s
        while not cancel.is_set():
            try:
                kind, value = self._lines.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise EngineError(
                        f"{self.server} sent nothing for {self.stall_s:g} s, so the reply was stopped. "
                        "The server may be overloaded or stuck: check it, then send again.", "stalled",
                    ) from None
                continue
            deadline = time.monotonic() + self.stall_s
            if kind == "end":
                return
            if kind == "error":
                if cancel.is_set():
                    return
                raise EngineError(
                    f"The connection to {self.server} broke mid-reply ({type(value).__name__}: {value}). "
                    "The server may have stopped; send again once it is back.", "connection_lost",
                ) from value
            chunk = self._parse(value)
            if chunk == "[DONE]":
                self.done = True
                return
            if chunk is not None:
                yield chunk

    def _parse(self, line: str) -> dict | str | None:
        if not line.startswith("data:"):
            return None  # blank separator, ": comment", event:/id:/retry: fields
        data = line[5:].strip()
        if data == "[DONE]":
            return data
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            self.skipped += 1
            log.warning("%s: skipped a malformed SSE data line: %.200s", self.server, data)
            return None
        return chunk

    def close(self) -> None:
        """Drop the connection now, so the server sees the client leave and stops generating."""
        stream = self.response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked in recv; close() alone does not
            except OSError:
                pass
        self.response.close()
        self._reader.join(timeout=2)


class Cancelled(Exception):
    """``cancel`` was set before the server answered."""


def send_cancellable(client: httpx.Client, request: httpx.Request, cancel: threading.Event | None,
                     stream: bool = False) -> httpx.Response:
    """``client.send(request)``, given up within one poll once ``cancel`` is set (raises Cancelled).

    The request runs on its own thread; on cancel its connection is shut down, which ends a wait for
    response headers at once (a connect still in progress is left to its own timeout, unheard).
    """
    if cancel is None:
        return client.send(request, stream=stream)
    sockets: list = []

    def trace(event: str, info: dict) -> None:
        if event == "connection.connect_tcp.complete":
            sockets.append(info["return_value"].get_extra_info("socket"))

    request.extensions = {**request.extensions, "trace": trace}
    outcome: dict = {}
    given_up = threading.Event()

    def send() -> None:
        try:
            outcome["response"] = client.send(request, stream=stream)
        except BaseException as exc:  # handed to the caller
            outcome["error"] = exc
        if given_up.is_set() and "response" in outcome:
            outcome["response"].close()

    sender = threading.Thread(target=send, name="http-send", daemon=True)
    sender.start()
    while sender.is_alive() and not cancel.is_set():
        sender.join(POLL_S)
    if sender.is_alive():
        given_up.set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        sender.join(1.0)
        if "response" in outcome:  # answered just as it was given up
            outcome["response"].close()
        raise Cancelled()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["response"]


def open_event_stream(client: httpx.Client, url: str, body: dict, headers: dict, server: str,
                      stall_s: float, cancel: threading.Event | None = None, images: bool = False) -> EventStream:
    """POST ``body`` and return its event stream, or raise EngineError for any refusal (Cancelled when
    ``cancel`` is set first; ``images``: ``body`` carries images)."""
    request = client.build_request("POST", url, content=orjson.dumps(body),
                                   headers={"Content-Type": "application/json", "Accept": "text/event-stream",
                                            **headers})
    try:
        response = send_cancellable(client, request, cancel, stream=True)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise connect_error(exc, url) from exc
    except httpx.TimeoutException as exc:
        raise EngineError(f"{server} did not start answering in time ({type(exc).__name__}). "
                          "Check that it is running, then send again.", "stalled") from exc
    except httpx.HTTPError as exc:
        raise EngineError(f"{server} broke the connection before answering ({type(exc).__name__}: {exc}). "
                          "Check that it is running, then send again.", "connection_lost") from exc
    if response.status_code != 200:
        try:
            raise http_error(response.status_code, error_detail(response), server,
                             response.headers.get("Retry-After"), images)
        finally:
            response.close()
    content_type = response.headers.get("Content-Type", "")
    if "text/event-stream" not in content_type:
        response.close()
        raise EngineError(f"{server} answered {url} with {content_type or 'no content type'}, not an event "
                          "stream: it does not look OpenAI-compatible. Check --base-url (the server's /v1 "
                          "address).", "not_openai")
    return EventStream(response, server, stall_s)
