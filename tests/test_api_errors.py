"""REST papercuts: health tells readiness apart from being up, and every /api path answers in the error shape."""

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
