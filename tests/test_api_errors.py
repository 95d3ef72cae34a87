"""REST papercuts: health tells readiness apart from being up, and every /api path answers every failure in the
error shape."""

from werkzeug.exceptions import UnsupportedMediaType

from engines.fake import FakeEngine
from webapp import create_app


def _app(load_s: float = 0.0):
    engine = FakeEngine(load_s=load_s)
    app = create_app(engine)
    return app, engine


def test_health_is_ready_only_once_the_engine_is():
    app, _ = _app()
    client = app.test_client()
    before = client.get("/api/health").get_json()
    assert before["ok"] is True and before["ready"] is False and before["state"] == "loading"
    app.extensions["specchat"].start_loading().join(timeout=10)
    after = client.get("/api/health").get_json()
    assert after["ready"] is True and after["state"] == "ready"
    assert after["engine"]["state"] == "ready"


def test_unknown_api_route_gets_the_json_error_shape():
    client = _app()[0].test_client()
    response = client.get("/api/no/such/route")
    assert response.status_code == 404
    assert response.is_json
    body = response.get_json()
    assert body["ok"] is False and body["error"]["code"] == "not_found"
    assert "/api/no/such/route" in body["error"]["message"]


def test_wrong_method_under_api_gets_the_json_error_shape():
    response = _app()[0].test_client().get("/api/engine")
    assert response.status_code == 405
    assert response.get_json()["error"]["code"] == "method_not_allowed"


def test_pages_keep_their_own_404():
    response = _app()[0].test_client().get("/no-such-page")
    assert response.status_code == 404
    assert not response.is_json


def test_a_body_over_flasks_limits_gets_the_json_error_shape():
    """A form field over Flask's form memory limit is refused by werkzeug itself, before the route runs."""
    body = b'--zz\r\nContent-Disposition: form-data; name="note"\r\n\r\n' + b"x" * 600_000 + b"\r\n--zz--\r\n"
    response = _app()[0].test_client().post("/api/attachments", data=body,
                                            content_type="multipart/form-data; boundary=zz")
    assert response.status_code == 413
    error = response.get_json()["error"]
    assert error["code"] == "too_large" and "POST /api/attachments" in error["message"]


def test_an_unexpected_failure_under_api_gets_the_json_error_shape():
    app, _ = _app()
    app.config["PROPAGATE_EXCEPTIONS"] = False  # as served: the exception becomes a 500, not the test's

    def broken(info):
        raise RuntimeError("a bug")

    app.extensions["specchat"].baselines.get = broken
    response = app.test_client().get("/api/baseline")
    assert response.status_code == 500
    body = response.get_json()
    assert body["ok"] is False and body["error"]["code"] == "internal"
    assert "GET /api/baseline" in body["error"]["message"] and "a bug" not in body["error"]["message"]


def test_any_other_error_flask_raises_under_api_is_named_by_its_status():
    app, _ = _app()

    def refused(info):
        raise UnsupportedMediaType("Send JSON.")

    app.extensions["specchat"].baselines.get = refused
    response = app.test_client().get("/api/baseline")
    assert response.status_code == 415
    assert response.get_json()["error"] == {"code": "unsupported_media_type",
                                            "message": "GET /api/baseline: Send JSON."}


def test_pages_keep_their_own_500():
    app, _ = _app()
    app.config["PROPAGATE_EXCEPTIONS"] = False

    @app.get("/broken-page")
    def broken_page():
        raise RuntimeError("a bug")

    response = app.test_client().get("/broken-page")
    assert response.status_code == 500
    assert not response.is_json
