"""REST: health, settings, cache reset, engine switch, race and sweep receipts, the drafter-off baseline, and
the stored conversations (list and search, read, rename, delete, export, import)."""

from __future__ import annotations

import re

from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from engines import EngineError, GenerationOptions

from ..conversations.exports import branch_markdown, export_json, imported, imported_images, parse_import
from ..conversations.store import parse_time
from ..errors import ClientError, api_of, error_body
from ..measurement.receipts import markdown
from .openai_routes import openai_http_error
from .protocol import CONTEST_ID

bp = Blueprint("api", __name__, url_prefix="/api")
MAX_LIST = 200
MAX_TITLE = 1000


def _host():
    return current_app.extensions["specchat"]


@bp.errorhandler(ClientError)
def _client_error(exc: ClientError):
    return jsonify(error_body(exc.code, exc.message)), exc.status


@bp.get("/health")
def health():
    """The server answers (`ok`); `ready` only once the engine can take a message, `state` says which
    of loading, ready or error it is in."""
    frame = _host().engine_frame()
    state = frame["engine"]["state"]
    return jsonify({"ok": True, "ready": state == "ready", "state": state,
                    "engine": frame["engine"], "spec": frame["spec"]})


@bp.app_errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    """What Flask answers by itself (a wrong path or method, a body over its limits, an unexpected exception: a
    500) gets the JSON error shape too under /api, OpenAI's under /v1; pages keep Flask's own."""
    api = api_of(request.path)
    if api == "openai":
        return openai_http_error(exc)
    if api is None:
        return exc
    return jsonify(error_body(*_described(exc))), exc.code


def _described(exc: HTTPException) -> tuple[str, str]:
    """The code and message of an error Flask raised under /api."""
    where = f"{request.method} {request.path}"
    known = {
        404: ("not_found", f"There is no {request.path}: docs/protocol.md lists the REST routes."),
        405: ("method_not_allowed", f"{where} is not supported: docs/protocol.md lists each REST route with its "
                                    "method."),
        413: ("too_large", f"{where} sent more than the server reads ({exc.description.rstrip('.')}): send less."),
        500: ("internal", f"{where} failed unexpectedly (specchat's log says why): try again."),
    }
    return known.get(exc.code) or (re.sub(r"\W+", "_", exc.name.lower()), f"{where}: {exc.description}")


@bp.post("/engine")
def switch_engine():
    spec = request.get_json(silent=True)
    if not isinstance(spec, dict):
        raise ClientError("bad_json", 'Send a JSON engine spec, e.g. {"name": "openai", "base_url": "http://127.0.0.1:8080/v1"}.')
    _host().switch_engine(spec)
    return jsonify({"ok": True, **{k: v for k, v in _host().engine_frame().items() if k != "type"}})


@bp.get("/settings")
def get_settings():
    return jsonify({"ok": True, "values": _host().settings.current.model_dump()})


@bp.get("/settings/schema")
def get_settings_schema():
    """The settings' JSON schema (each field's title, type, bounds and default): the pane's labels and the
    limits it checks before sending are these, written once in engines/options.py."""
    return jsonify({"ok": True, "schema": GenerationOptions.model_json_schema()})


@bp.post("/settings")
def post_settings():
    values = request.get_json(silent=True)
    if not isinstance(values, dict):
        raise ClientError("bad_json", "Send a JSON object of settings to change, e.g. {\"reasoning_budget\": 0}.")
    return jsonify({"ok": True, "values": _host().update_settings(values)})


@bp.post("/cache/reset")
def reset_cache():
    try:
        body = request.get_json(silent=True)
        freed = _host().engine.reset_cache(deep=isinstance(body, dict) and body.get("deep") is True)
    except EngineError as exc:
        raise ClientError(exc.code, exc.message, status=409) from None
    return jsonify({"ok": True, "freed": freed})


@bp.get("/receipts/<id>")
def receipt(id: str):
    found = _host().receipts.get(id) if re.fullmatch(CONTEST_ID, id) else None
    if found is None:
        raise ClientError("unknown_receipt", f"No race or block sweep with id {id!r} has a receipt: run one "
                          "first, then use the id from its race_done or sweep_done frame.", status=404)
    kind = request.args.get("format", "json")
    if kind == "json":
        return jsonify({"ok": True, "receipt": found})
    if kind == "markdown":
        return Response(markdown(found), mimetype="text/markdown")
    raise ClientError("bad_format", f"Unknown receipt format {kind!r}: use format=json or format=markdown.")


@bp.get("/baseline")
def baseline():
    host = _host()
    return jsonify({"ok": True, "baseline": host.baselines.get(host.engine.info())})


@bp.post("/calibrate")
def calibrate():
    baseline = _host().calibrate()
    if baseline is None:
        return jsonify({"ok": True, "baseline": None, "gave_way": True,
                        "message": "The measurement stopped to let a message through: measure again when the "
                                   "model is idle."})
    return jsonify({"ok": True, "baseline": baseline})


# Stored conversations

def _conversations():
    return _host().conversations


def _stored(id: str) -> dict:
    found = _conversations().store.conversation(id)
    if found is None:
        raise ClientError("unknown_conversation", f"No conversation {id!r}: list them with GET /api/conversations.",
                          status=404)
    return found


@bp.get("/conversations")
def list_conversations():
    args = request.args
    limit = args.get("limit", "50")
    if not (limit.isdigit() and 1 <= int(limit) <= MAX_LIST):
        raise ClientError("bad_limit", f"limit must be a whole number from 1 to {MAX_LIST}, not {limit!r}.")
    before = args.get("before") or None
    if before is not None:
        try:
            parse_time(before)
        except ValueError:
            raise ClientError("bad_before", f"before must be a conversation's updated_at (e.g. "
                              f"2025-01-31T12:00:00.000000Z), not {before!r}.") from None
    found = _conversations().store.search(args.get("q", ""), int(limit), before)
    return jsonify({"ok": True, "conversations": found})


@bp.get("/conversations/<id>")
def get_conversation(id: str):
    return jsonify({"ok": True, **_stored(id)})


@bp.patch("/conversations/<id>")
def rename_conversation(id: str):
    body = request.get_json(silent=True)
    title = body.get("title") if isinstance(body, dict) else None
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise ClientError("bad_title", f'Send {{"title": "…"}}: a title of 1 to {MAX_TITLE} characters.')
    _stored(id)
    _conversations().store.rename(id, title.strip())
    return jsonify({"ok": True, **_stored(id)})


@bp.delete("/conversations/<id>")
def delete_conversation(id: str):
    _stored(id)
    _conversations().delete(id)
    return Response(status=204)


@bp.get("/conversations/<id>/export")
def export_conversation(id: str):
    conversation = _stored(id)
    kind = request.args.get("format", "json")
    if kind == "json":
        ids = [id for message in conversation["messages"] for id in message["images"]]
        response = jsonify(export_json(conversation, _conversations().store.attachments(ids)))
        suffix = "json"
    elif kind == "markdown":
        branch = _conversations().store.branch(id, conversation["current"])
        response = Response(branch_markdown(conversation, branch), mimetype="text/markdown")
        suffix = "md"
    else:
        raise ClientError("bad_format", f"Unknown export format {kind!r}: use format=json or format=markdown.")
    response.headers["Content-Disposition"] = f'attachment; filename="specchat-{id}.{suffix}"'
    return response


@bp.post("/conversations/import")
def import_conversation():
    export = parse_import(request.get_json(silent=True))
    title, created_at, current, messages = imported(export)
    store = _conversations().store
    for attachment in imported_images(export):
        store.put_attachment(attachment)
    return jsonify({"ok": True, "id": _conversations().store.create(title, created_at, current, messages)}), 201
