"""REST: images uploaded for messages (``POST /api/attachments``) and served back (``GET /api/attachments/<id>``)."""

from __future__ import annotations

import re

from flask import Blueprint, Response, current_app, jsonify, request

from ..conversations.images import ID_CHARS, KINDS, MAX_BYTES, read_image, too_large
from ..errors import ClientError, error_body

bp = Blueprint("attachments", __name__, url_prefix="/api/attachments")
CACHE_FOR_S = 365 * 24 * 3600  # an id names its content, which never changes


def _store():
    return current_app.extensions["specchat"].conversations.store


@bp.errorhandler(ClientError)
def _client_error(exc: ClientError):
    return jsonify(error_body(exc.code, exc.message)), exc.status


@bp.post("")
def upload():
    """One image, as the multipart field ``file`` or as the raw body with the image's Content-Type."""
    if request.content_length is not None and request.content_length > MAX_BYTES + 64 * 1024:
        raise too_large(request.content_length)  # refused before the body is read
    if request.mimetype == "multipart/form-data":
        upload = request.files.get("file")
        if upload is None:
            raise ClientError("bad_image", 'Send the image as the multipart field "file", or as the raw body '
                              "with its Content-Type (e.g. image/png).")
        data = upload.stream.read(MAX_BYTES + 1)
    elif request.mimetype.startswith("image/"):
        data = request.stream.read(MAX_BYTES + 1)
    else:
        raise ClientError("bad_image", f"Send a {KINDS} image: as the multipart field \"file\", or as the raw "
                          f"body with an image Content-Type (not {request.mimetype or 'none'!r}).")
    attachment = read_image(data)
    _store().put_attachment(attachment)
    return jsonify({"ok": True, "attachment": attachment.to_dict()})


@bp.get("/<id>")
def serve(id: str):
    found = _store().attachments([id]).get(id) if re.fullmatch(f"[0-9a-f]{{{ID_CHARS}}}", id) else None
    if found is None:
        raise ClientError("unknown_attachment", f"No image {id!r} is stored: it was never uploaded, or the "
                          "conversations that held it were deleted.", status=404)
    if request.if_none_match.contains(found["sha256"]):
        response = Response(status=304)
    else:
        response = Response(found["data"], mimetype=found["mime"])
    response.set_etag(found["sha256"])
    response.headers["Cache-Control"] = f"private, max-age={CACHE_FOR_S}, immutable"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
