"""REST: health, settings, cache reset, engine switch, race receipts, the drafter-off baseline."""

from __future__ import annotations

import re

from flask import Blueprint, Response, current_app, jsonify, request

from engines import EngineError

from .errors import ClientError, error_body
from .protocol import CONTEST_ID
from .receipts import markdown

bp = Blueprint("api", __name__, url_prefix="/api")


def _host():
    return current_app.extensions["specchat"]


@bp.errorhandler(ClientError)
def _client_error(exc: ClientError):
    return jsonify(error_body(exc.code, exc.message)), exc.status


@bp.get("/health")
def health():
    frame = _host().engine_frame()
    return jsonify({"ok": True, "engine": frame["engine"], "spec": frame["spec"]})


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
        raise ClientError("unknown_receipt", f"No race with id {id!r} has a receipt: race first, then use the id "
                          "from its race_done frame.", status=404)
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
    return jsonify({"ok": True, "baseline": _host().calibrate()})
