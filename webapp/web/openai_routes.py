"""The OpenAI-compatible API: ``GET /v1/models`` and ``POST /v1/chat/completions``, streamed (SSE) or not, on
the app's one engine, behind the same access rules as the page (security.py)."""

from __future__ import annotations

import time
import uuid

import orjson
from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from engines import Answer, Done, Message, Stats, Thinking, ToolCall, Turn, guarded

from ..openai_api.errors import ApiError, error_body
from ..openai_api.history import store_exchange
from ..openai_api.replies import Chunks, StopCut, completion
from ..openai_api.requests import parse_request

bp = Blueprint("openai", __name__, url_prefix="/v1")
WAIT_S = 600.0  # the longest a request waits for its turn
GONE_CHECK_S = 0.05  # how often a reply not streamed looks whether its client is still there
STATUS = {"context_length": 400, "no_vision": 400, "no_tools": 400, "not_ready": 503, "busy": 503}
CODES = {"context_length": "context_length_exceeded"}


def _host():
    return current_app.extensions["specchat"]


@bp.errorhandler(ApiError)
def _api_error(exc: ApiError):
    response = jsonify(exc.body())
    response.status_code = exc.status
    response.headers.update(exc.headers)
    return response


@bp.errorhandler(HTTPException)
def openai_http_error(exc: HTTPException):
    """A wrong path or method under /v1, in OpenAI's error shape (api.py routes unmatched /v1 paths here)."""
    code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
        exc.code, "internal_error" if (exc.code or 500) >= 500 else "invalid_request")
    message = {404: f"There is no {request.path}: specchat serves /v1/models and /v1/chat/completions.",
               405: f"{request.method} {request.path} is not supported."}.get(exc.code, exc.description)
    return jsonify(error_body(exc.code or 400, code, message)), exc.code


def _model_id() -> str:
    return _host().engine.info().model


@bp.get("/models")
def models():
    """The loaded model, with its context, whether it can see and whether it drafts."""
    host = _host()
    info = host.engine.info()
    size = host.engine.prompt_size([Message("user", "")], host.settings.current)
    return jsonify({"object": "list", "data": [{
        "id": info.model, "object": "model", "created": int(time.time()), "owned_by": "specchat",
        "context_length": size[1] if size else None, "vision": info.vision, "drafter": info.drafter,
        "state": info.state,
    }]})


@bp.post("/chat/completions")
def chat_completions():
    host = _host()
    info = host.engine.info()
    chat = parse_request(request.get_data(cache=False), host.settings.current, info.vision)
    if chat.model != info.model:
        raise ApiError(404, "model_not_found", f"The model {chat.model!r} is not loaded: specchat serves "
                       f"{info.model!r} (GET /v1/models).", "model")
    if chat.tools and not info.tools:
        raise ApiError(400, "unsupported_parameter", f"The {info.name} engine does not call tools yet: leave tools "
                       "out, or load an engine that calls them.", "tools")
    turn = Turn(id=uuid.uuid4().hex, conversation_id=f"api-{uuid.uuid4().hex}", messages=chat.messages,
                options=chat.options, tools=chat.tools, tool_choice=chat.tool_choice)
    sized = host.engine.prompt_size(chat.messages, chat.options)
    if sized is not None and sized[0] >= sized[1]:
        raise ApiError(400, "context_length_exceeded", f"The prompt is {sized[0]} tokens; this model holds at most "
                       f"{sized[1]}. Send fewer or shorter messages.", "messages")
    gone = request.environ.get("specchat.client_gone", lambda: False)
    stream = host.api.open(host, turn, gone=gone, wait_s=WAIT_S)
    events = guarded(stream)
    try:
        first = next(events)
    except BaseException:
        stream.close()
        raise
    if isinstance(first, Done) and first.finish_reason == "error":
        stream.close()
        host.engine.forget(turn.conversation_id)
        raise _failed(first)
    keep = _keeper(host, chat, info) if current_app.config.get("API_STORE") else None
    if chat.stream:
        return Response(_streamed(host, chat, turn, first, events, stream, info.model, keep),
                        mimetype="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    try:
        answer, thinking, calls, done = _collected(chat, turn, first, events, gone)
    finally:
        stream.close()
        host.engine.forget(turn.conversation_id)
    if done.finish_reason == "error":
        raise _failed(done)
    if keep is not None:
        keep(answer, thinking, done)
    return jsonify(completion(info.model, answer, thinking, done.finish_reason, done.stats, calls))


def _keeper(host, chat, info):
    """--api-store: what stores a finished exchange in the history."""
    def keep(answer: str, thinking: str, done: Done) -> None:
        store_exchange(host.conversations.store, chat, info, answer, thinking, done.finish_reason, done.stats)

    return keep


def _failed(done: Done) -> ApiError:
    code = done.error_code or "generation_failed"
    return ApiError(STATUS.get(code, 500), CODES.get(code, code), done.error_message or "The reply failed.")


def _cut(chat, turn: Turn, first, events):
    """The reply's thinking and answer, the answer cut at the first stop string (whose reply then stops), and
    last its ``Done``: a reply cut at a stop string ends as "stop", as OpenAI's do."""
    cut = StopCut(chat.stop)
    for event in _chain(first, events):
        if isinstance(event, Thinking):
            if event.text:
                yield event
        elif isinstance(event, Answer):
            text = cut.feed(event.text)
            if text:
                yield Answer(text)
            if cut.hit:
                turn.cancel.set()
        elif isinstance(event, Done):
            rest = cut.rest()
            if rest:
                yield Answer(rest)
            yield Done("stop", event.stats) if cut.hit and event.finish_reason == "cancelled" else event
            return
        elif isinstance(event, (ToolCall, Stats)) and not cut.hit:
            yield event


def _collected(chat, turn: Turn, first, events, gone) -> tuple[str, str, list[ToolCall], Done]:
    """The whole reply; a client that leaves meanwhile (``gone``, looked at every ``GONE_CHECK_S``) stops it."""
    said = {Thinking: [], Answer: [], ToolCall: []}
    looked = time.monotonic()
    for event in _cut(chat, turn, first, events):
        if time.monotonic() - looked > GONE_CHECK_S:
            looked = time.monotonic()
            if gone():
                turn.cancel.set()
        if isinstance(event, Done):
            return "".join(said[Answer]), "".join(said[Thinking]), said[ToolCall], event
        if not isinstance(event, Stats):
            said[type(event)].append(event if isinstance(event, ToolCall) else event.text)
    raise RuntimeError("a reply ended without its done")  # guarded() always ends with one


def _streamed(host, chat, turn: Turn, first, events, stream, model: str, keep):
    """The SSE body. A client that leaves makes the server close this generator: the reply stops then, at its
    next token (``stream.close`` sets the turn's cancel)."""
    chunks = Chunks(chat, model)
    said = {Thinking: [], Answer: []}
    calls = 0
    try:
        yield _sse(chunks.role())
        for event in _cut(chat, turn, first, events):
            if isinstance(event, ToolCall):
                yield _sse(chunks.tool_call(calls, event))
                calls += 1
            elif isinstance(event, Stats):
                yield _sse(chunks.progress(event.values))
            elif not isinstance(event, Done):
                said[type(event)].append(event.text)
                yield _sse(chunks.text(isinstance(event, Thinking), event.text))
            elif event.finish_reason == "error":
                yield _sse(_failed(event).body())
            else:
                yield _sse(chunks.finish(event.finish_reason))
                if chat.include_usage:
                    yield _sse(chunks.usage(event.stats))
                if keep is not None:
                    keep("".join(said[Answer]), "".join(said[Thinking]), event)
        yield b"data: [DONE]\n\n"
    finally:
        stream.close()
        host.engine.forget(turn.conversation_id)


def _chain(first, events):
    yield first
    yield from events


def _sse(payload: dict) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"
