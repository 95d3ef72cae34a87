"""Who may talk to this server, and what a page it serves may do.

- Host and Origin: requests whose Host or Origin is not this server get 403 (DNS rebinding,
  cross-site websockets).
- The access token (``ACCESS_TOKEN``): when set, every request (page, REST, static file, websocket
  handshake) needs it, as the cookie that ``/?token=TOKEN`` sets or as ``Authorization: Bearer``.
- Security headers on every response: a Content-Security-Policy that runs only this server's
  scripts (plus the import map, allowed by its hash), no framing, no sniffing, no referrer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import urlencode, urlsplit

from flask import current_app, g, jsonify, redirect, request
from markupsafe import Markup

from ..errors import api_of, error_body
from ..openai_api.errors import error_body as openai_error_body

LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
COOKIE = "specchat_token"


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
    if current_app.config.get("ACCESS_TOKEN"):
        # The token guards the server, so it answers whatever name it is reached by (a machine's
        # LAN address); a page of another site still may not talk to it.
        foreign = origin is not None and origin_host != host
    else:
        foreign = host not in allowed or (origin is not None and origin_host not in allowed)
    if foreign:
        message = ("This server only answers pages it serves itself: open it at its own address "
                   f"({sorted(allowed)[0]}).")
        if api_of(request.path) == "openai":
            return openai_error_body(403, "forbidden_origin", message), 403
        return error_body("forbidden_origin", message), 403
    return None


# --- the access token ---------------------------------------------------------------------------

def _matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _unauthorized():
    message = ("This specchat needs its access token: open the address it printed (ending in /?token=…), "
               "or send Authorization: Bearer TOKEN.")
    api = api_of(request.path)
    if api == "openai":
        response = jsonify(openai_error_body(401, "invalid_api_key", message))
    elif api == "specchat":
        response = jsonify(error_body("unauthorized", message))
    else:
        response = current_app.response_class(message + "\n", mimetype="text/plain")
    response.status_code = 401
    response.headers["WWW-Authenticate"] = 'Bearer realm="specchat"'
    return response


def check_token():
    token = current_app.config.get("ACCESS_TOKEN")
    if not token:
        return None
    if request.path == "/" and "token" in request.args:
        if not _matches(request.args.get("token"), token):
            return _unauthorized()
        # Swap the token in the address for a cookie; the page keeps its other arguments (?c=ID).
        rest = [(key, value) for key, value in request.args.items(multi=True) if key != "token"]
        response = redirect("/" + ("?" + urlencode(rest) if rest else ""), 303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        response.headers["Cache-Control"] = "no-store"
        return response
    scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
    if _matches(request.cookies.get(COOKIE), token) or (
            scheme.lower() == "bearer" and _matches(bearer.strip(), token)):
        return None
    return _unauthorized()


# --- security headers ---------------------------------------------------------------------------

def allow_script(text) -> Markup:
    """Template filter: mark ``text`` as the body of an inline <script> this response may run.

    Its hash goes into this response's CSP; the filter's output must be the element's exact content.
    """
    text = Markup(text)
    digest = base64.b64encode(hashlib.sha256(str(text).encode()).digest()).decode()
    g.setdefault("csp_script_hashes", []).append(f"'sha256-{digest}'")
    return text


def content_security_policy() -> str:
    scripts = " ".join(["'self'", *g.get("csp_script_hashes", [])])
    return "; ".join([
        "default-src 'self'",
        f"script-src {scripts}",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


def add_headers(response):
    headers = response.headers
    headers["Content-Security-Policy"] = content_security_policy()
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Referrer-Policy"] = "no-referrer"
    headers["X-Frame-Options"] = "DENY"  # frame-ancestors, for browsers that predate it
    return response


def init_app(app) -> None:
    app.config.setdefault("ACCESS_TOKEN", None)
    app.before_request(check_token)
    app.before_request(check_origin)
    app.after_request(add_headers)
    app.add_template_filter(allow_script)
