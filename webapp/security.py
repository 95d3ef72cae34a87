"""Refuse requests whose Host or Origin is not this server (DNS rebinding, cross-site websockets)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import current_app, request

from .errors import error_body

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(host: str, port: int) -> set[str]:
    names = set(LOCAL_NAMES)
    if host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host else host)
    return {f"{name}:{port}" for name in names}


def check_origin():
    allowed = current_app.config.get("ALLOWED_HOSTS")
    if not allowed:
        return None
    host = (request.host or "").lower()
    origin = request.headers.get("Origin")
    origin_host = urlsplit(origin).netloc.lower() if origin else None
    if host not in allowed or (origin is not None and origin_host not in allowed):
        return error_body(
            "forbidden_origin",
            "This server only answers pages it serves itself: open it at its own address "
            f"({sorted(allowed)[0]}).",
        ), 403
    return None


def init_app(app) -> None:
    app.before_request(check_origin)
