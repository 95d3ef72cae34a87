"""The access token (required off loopback) and the security headers on every response."""

import base64
import hashlib
import json
import os
import re
import subprocess
import sys

import pytest
import requests
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from engines.fake import FakeEngine
from tests.support.browser import collect_errors
from webapp import ROOT, create_app
from webapp.cli import parse_args
from webapp.web import security

TOKEN = "t0k3n-for-the-tests_0123456789"
TIMEOUT = 10


@pytest.fixture
def app():
    return create_app(FakeEngine(delay_s=0), config={"ACCESS_TOKEN": TOKEN})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def open_client():
    """No token: as on loopback by default."""
    return create_app(FakeEngine(delay_s=0)).test_client()


BEARER = {"Authorization": f"Bearer {TOKEN}"}


def script_hashes(policy: str) -> list[str]:
    directive = next(d.strip() for d in policy.split(";") if d.strip().startswith("script-src "))
    sources = directive.split()[1:]
    assert sources[0] == "'self'" and all(s.startswith("'sha256-") for s in sources[1:]), directive
    return sources[1:]


def assert_security_headers(response):
    policy = response.headers.get("Content-Security-Policy", "")
    directives = {d.strip().split()[0]: d.strip().split()[1:] for d in policy.split(";") if d.strip()}
    assert directives.get("frame-ancestors") == ["'none'"], policy
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy, policy
    script_hashes(policy)  # 'self', plus hashes of exactly allowed inline scripts, nothing else
    assert directives.get("default-src") == ["'self'"] and directives.get("object-src") == ["'none'"], policy
    assert response.headers.get("X-Content-Type-Options") == "nosniff"
    assert response.headers.get("Referrer-Policy") == "no-referrer"


# --- headers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, status", [
    ("/", 200),
    ("/static/favicon.svg", 200),
    ("/static/js/main.js", 200),
    ("/api/health", 200),
    ("/api/conversations/nope", 404),
    ("/no/such/page", 404),
    ("/static/no-such-file.js", 404),
])
def test_every_kind_of_response_has_the_headers(open_client, path, status):
    response = open_client.get(path)
    assert response.status_code == status
    assert_security_headers(response)


def test_refusals_and_redirects_have_the_headers(client, app):
    assert_security_headers(client.get("/"))  # 401
    assert_security_headers(client.get("/api/health"))  # 401, JSON
    assert_security_headers(client.get(f"/?token={TOKEN}"))  # 303
    app.config["ALLOWED_HOSTS"] = {"127.0.0.1:8765"}
    forbidden = client.get("/api/health", headers={**BEARER, "Origin": "http://evil.example"},
                           base_url="http://127.0.0.1:8765")
    assert forbidden.status_code == 403
    assert_security_headers(forbidden)


def test_the_page_runs_no_inline_script_but_its_import_map(open_client):
    response = open_client.get("/")
    page = response.get_data(as_text=True)
    inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>(.*?)</script>", page, re.S)
    assert [attrs.strip() for attrs, _ in inline] == ['type="importmap"']
    body = inline[0][1]
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    assert script_hashes(response.headers["Content-Security-Policy"]) == [f"'sha256-{digest}'"]
    assert '"@app/api.js": "/static/js/api.js?v=' in body  # the map itself still reaches the page
    assert not re.search(r"<[^>]+\son[a-z]+=", page), "inline event handler"
    assert not re.search(r"<[^>]+\sstyle=", page), "inline style"
    # Other responses allow no inline script at all.
    assert script_hashes(open_client.get("/api/health").headers["Content-Security-Policy"]) == []


# --- the token ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/?c=abc", "/static/favicon.svg", "/no/such/page"])
def test_pages_and_static_files_need_the_token(client, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response.mimetype == "text/plain"
    assert "access token" in response.get_data(as_text=True)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("method, path", [
    ("GET", "/api/health"), ("GET", "/api/conversations"), ("POST", "/api/conversations/import"),
    ("DELETE", "/api/conversations/abc"), ("GET", "/api/no-such-route"),
])
def test_rest_needs_the_token(client, method, path):
    response = client.open(path, method=method, json={})
    assert response.status_code == 401
    assert response.get_json() == {"ok": False, "error": {"code": "unauthorized", "message": response.get_json()[
        "error"]["message"]}}
    assert "Bearer" in response.get_json()["error"]["message"]


def test_the_token_in_the_address_becomes_a_cookie(client):
    response = client.get(f"/?c=abc&token={TOKEN}")
    assert response.status_code == 303
    assert response.headers["Location"] == "/?c=abc"  # the token is gone from the address
    assert response.headers["Cache-Control"] == "no-store"
    cookie = response.headers["Set-Cookie"]
    parts = [p.strip() for p in cookie.split(";")]
    assert parts[0] == f"{security.COOKIE}={TOKEN}"
    assert "HttpOnly" in parts and "SameSite=Strict" in parts and "Path=/" in parts, cookie
    assert client.get(f"/?token={TOKEN}").headers["Location"] == "/"
    # The test client keeps the cookie, like a browser: now everything is open.
    assert client.get("/").status_code == 200
    assert client.get("/?c=abc").status_code == 200
    assert client.get("/api/health").get_json()["ok"] is True
    assert client.get("/static/favicon.svg").status_code == 200


def test_bearer_works_and_wrong_tokens_do_not(client):
    assert client.get("/api/health", headers=BEARER).status_code == 200
    assert client.get("/", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
    for wrong in ("Bearer nope", f"Bearer {TOKEN}x", f"Basic {TOKEN}", f"Bearer {TOKEN[:-1]}", "Bearer"):
        assert client.get("/api/health", headers={"Authorization": wrong}).status_code == 401, wrong
    response = client.get("/?token=wrong-token-123")
    assert response.status_code == 401 and "Set-Cookie" not in response.headers
    client.set_cookie(security.COOKIE, "wrong-token-123")
    assert client.get("/api/health").status_code == 401


def test_a_spoofed_host_is_not_enough(client, app):
    app.config["ALLOWED_HOSTS"] = {"127.0.0.1:8765", "localhost:8765"}
    for base in ("http://127.0.0.1:8765", "http://localhost:8765"):
        assert client.get("/api/health", base_url=base).status_code == 401
        assert client.get("/api/health", base_url=base, headers={"Origin": base}).status_code == 401
    # With the token the server answers the name it is reached by (a LAN address) ...
    assert client.get("/api/health", base_url="http://192.168.1.20:8765", headers=BEARER).status_code == 200
    # ... but a page of another site still may not talk to it.
    assert client.get("/api/health", base_url="http://192.168.1.20:8765",
                      headers={**BEARER, "Origin": "http://evil.example"}).status_code == 403


def test_tokens_are_compared_in_constant_time(client, monkeypatch):
    seen = []
    real = security.hmac.compare_digest

    def spy(a, b):
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(security.hmac, "compare_digest", spy)
    assert client.get("/api/health", headers=BEARER).status_code == 200
    assert client.get("/api/health", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert (TOKEN.encode(), TOKEN.encode()) in seen and (b"nope", TOKEN.encode()) in seen


def test_without_a_token_nothing_changes(open_client):
    assert open_client.get("/").status_code == 200
    assert open_client.get("/api/health").status_code == 200
    assert open_client.get(f"/?token={TOKEN}").status_code == 200  # no redirect, no cookie
    assert "Set-Cookie" not in open_client.get(f"/?token={TOKEN}").headers


# --- the websocket handshake, on a real server ------------------------------------------------

def test_the_websocket_handshake_needs_the_token(fake_server):
    fake_server.app.config["ACCESS_TOKEN"] = TOKEN
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Cookie": f"{security.COOKIE}=nope"}):
        with pytest.raises(InvalidStatus) as info:
            with connect(fake_server.ws_url, open_timeout=TIMEOUT, additional_headers=headers):
                pass
        assert info.value.response.status_code == 401
    for headers in (BEARER, {"Cookie": f"{security.COOKIE}={TOKEN}"}):
        with connect(fake_server.ws_url, open_timeout=TIMEOUT, additional_headers=headers) as ws:
            assert json.loads(ws.recv(timeout=TIMEOUT))["type"] == "hello"
    # A foreign Origin is refused even with the token (cross-site websocket hijacking).
    with pytest.raises(InvalidStatus) as info:
        with connect(fake_server.ws_url, open_timeout=TIMEOUT, origin="http://evil.example",
                     additional_headers=BEARER):
            pass
    assert info.value.response.status_code == 403


@pytest.mark.browser
def test_chromium_logs_in_through_the_address_and_connects(browser, fake_server):
    fake_server.app.config["ACCESS_TOKEN"] = TOKEN
    context = browser.new_context()  # a context of its own: no cookie from any other test
    try:
        refused = context.new_page()
        assert refused.goto(fake_server.url + "/").status == 401
        refused.close()
        page = context.new_page()  # apart from the refused page's own late requests (its icon)
        errors = []
        collect_errors(page, errors)
        page.goto(f"{fake_server.url}/?token={TOKEN}")
        page.wait_for_selector("#engine[data-state=ready]", timeout=30_000)  # the websocket got in
        assert page.url == fake_server.url + "/"
        assert page.evaluate("document.cookie") == ""  # HttpOnly: out of the page's reach
        assert errors == []
    finally:
        context.close()


# --- the command line ---------------------------------------------------------------------------

def env_without_token():
    return {k: v for k, v in os.environ.items() if k != "SPECCHAT_TOKEN"}


def test_off_loopback_without_a_token_refuses_to_start(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "webapp", "--host", "0.0.0.0", "--port", "0", "--engine", "fake",
         "--data-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env_without_token())
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "--token" in lines[0] and "SPECCHAT_TOKEN" in lines[0] and "0.0.0.0" in lines[0]
    suggested = re.search(r"--token (\S+)$", lines[0])
    assert suggested and len(suggested.group(1)) >= 24  # a fresh token to copy
    assert result.stdout == ""
    assert not (tmp_path / "specchat.db").exists()  # refused before anything started


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.org"])
def test_every_address_but_loopback_needs_a_token(monkeypatch, capsys, host):
    monkeypatch.delenv("SPECCHAT_TOKEN", raising=False)
    with pytest.raises(SystemExit) as info:
        parse_args(["--host", host])
    assert info.value.code == 2
    assert "--token" in capsys.readouterr().err
    assert parse_args(["--host", host, "--token", TOKEN]).token == TOKEN
    monkeypatch.setenv("SPECCHAT_TOKEN", TOKEN)
    assert parse_args(["--host", host]).token == TOKEN


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_loopback_needs_no_token(monkeypatch, host):
    monkeypatch.delenv("SPECCHAT_TOKEN", raising=False)
    assert parse_args(["--host", host]).token is None


@pytest.mark.parametrize("token", ["short", "has space in it", "semi;colon;token", "é-not-ascii-token"])
def test_a_token_must_be_url_safe(monkeypatch, capsys, token):
    with pytest.raises(SystemExit) as info:
        parse_args(["--token", token])
    message = capsys.readouterr().err
    assert info.value.code == 2 and "--token (or $SPECCHAT_TOKEN) must be" in message
    assert len(message.strip().splitlines()) == 1


def test_a_token_on_loopback_is_enforced_and_printed(start_server, monkeypatch):
    monkeypatch.setenv("SPECCHAT_TOKEN", TOKEN)
    server = start_server("--engine", "fake")
    assert f"open {server.url}/?token={TOKEN} " in "".join(server.lines)
    assert requests.get(server.url + "/api/health", timeout=TIMEOUT).status_code == 401
    assert requests.get(server.url + "/", timeout=TIMEOUT).status_code == 401
    assert requests.get(server.url + "/api/health", headers=BEARER, timeout=TIMEOUT).json()["ok"] is True
    with requests.Session() as browser:
        page = browser.get(f"{server.url}/?token={TOKEN}", timeout=TIMEOUT)
        assert page.status_code == 200 and page.url == server.url + "/" and "importmap" in page.text
        assert browser.get(server.url + "/api/health", timeout=TIMEOUT).status_code == 200
