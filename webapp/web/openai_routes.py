"""The OpenAI-compatible API: ``GET /v1/models`` and ``POST /v1/chat/completions``, streamed (SSE) or not, on
the app's one engine, behind the same access rules as the page (security.py)."""

from __future__ import annotations

import time
import uuid

import orjson
from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from engines import Answer, Done, Message, Thinking, Turn, guarded

from ..openai_api.errors import ApiError, error_body
from ..openai_api.history import store_exchange
from ..openai_api.replies import Chunks, StopCut, completion
from ..openai_api.requests import parse_request

bp = Blueprint("openai", __name__, url_prefix="/v1")
WAIT_S = 600.0  # the longest a request waits for its turn
STATUS = {"context_length": 400, "no_vision": 400, "not_ready": 503, "busy": 503}
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
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.code, "invalid_request")
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
    turn = Turn(id=uuid.uuid4().hex, conversation_id=f"api-{uuid.uuid4().hex}", messages=chat.messages,
                options=chat.options)
    sized = host.engine.prompt_size(chat.messages, chat.options)
    if sized is not None and sized[0] >= sized[1]:
        raise ApiError(400, "context_length_exceeded", f"The prompt is {sized[0]} tokens; this model holds at most "
                       f"{sized[1]}. Send fewer or shorter messages.", "messages")
    stream = host.api.open(host, turn, gone=lambda: False, wait_s=WAIT_S)
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
        answer, thinking, done = _collected(chat, turn, first, events)
    finally:
        stream.close()
        host.engine.forget(turn.conversation_id)
    if done.finish_reason == "error":
        raise _failed(done)
    if keep is not None:
        keep(answer, thinking, done)
    return jsonify(completion(info.model, answer, thinking, done.finish_reason, done.stats))


def _keeper(host, chat, info):
    """--api-store: what stores a finished exchange in the history."""
    def keep(answer: str, thinking: str, done: Done) -> None:
        store_exchange(host.conversations.store, chat, info, answer, thinking, done.finish_reason, done.stats)

    return keep


def _failed(done: Done) -> ApiError:
    code = done.error_code or "generation_failed"
    return ApiError(STATUS.get(code, 500), CODES.get(code, code), done.error_message or "The reply failed.")


def _collected(chat, turn: Turn, first, events) -> tuple[str, str, Done]:
    cut, answer, thinking = StopCut(chat.stop), [], []
    for event in _chain(first, events):
        if isinstance(event, Thinking):
            thinking.append(event.text)
        elif isinstance(event, Answer):
            answer.append(cut.feed(event.text))
            if cut.hit:
                turn.cancel.set()
        elif isinstance(event, Done):
            answer.append(cut.rest())
            return "".join(answer), "".join(thinking), _stopped(event, cut)
    raise RuntimeError("a reply ended without its done")  # guarded() always ends with one


def _stopped(done: Done, cut: StopCut) -> Done:
    """A reply cut at a stop string ends as "stop", as OpenAI's do."""
    return Done("stop", done.stats) if cut.hit and done.finish_reason == "cancelled" else done


def _streamed(host, chat, turn: Turn, first, events, stream, model: str, keep):
    """The SSE body. A client that leaves makes the server close this generator: the reply stops then, at its
    next token (``stream.close`` sets the turn's cancel)."""
    chunks, cut = Chunks(chat, model), StopCut(chat.stop)
    said = {Thinking: [], Answer: []}
    try:
        yield _sse(chunks.role())
        for event in _chain(first, events):
            if isinstance(event, (Thinking, Answer)):
                text = event.text if isinstance(event, Thinking) else cut.feed(event.text)
                if text:
                    said[type(event)].append(text)
                    yield _sse(chunks.text(isinstance(event, Thinking), text))
                if cut.hit:
                    turn.cancel.set()
            elif isinstance(event, Done):
                rest = cut.rest()
                if rest:
                    said[Answer].append(rest)
                    yield _sse(chunks.text(False, rest))
                done = _stopped(event, cut)
                if done.finish_reason == "error":
                    yield _sse(_failed(done).body())
                else:
                    yield _sse(chunks.finish(done.finish_reason))
                    if chat.include_usage:
                        yield _sse(chunks.usage(done.stats))
                    if keep is not None:
                        keep("".join(said[Answer]), "".join(said[Thinking]), done)
                yield b"data: [DONE]\n\n"
                return
    finally:
        stream.close()
        host.engine.forget(turn.conversation_id)


def _chain(first, events):
    yield first
    yield from events


def _sse(payload: dict) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"
