"""One error shape for REST responses and websocket frames."""

from __future__ import annotations

from pydantic import ValidationError


class ClientError(Exception):
    """Bad input from a client: a stable code and a message saying how to fix it."""

    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def describe_validation(exc: ValidationError) -> str:
    """``field: problem`` for each error, joined; the reader sees which value to change."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "value"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def error_frame(code: str, message: str, id: str | None = None) -> dict:
    return {"type": "error", "id": id, "code": code, "message": message}


def error_body(code: str, message: str) -> dict:
    return {"ok": False, "error": {"code": code, "message": message}}


def api_of(path: str) -> str | None:
    """The API a request's path is under, which decides the error shape its clients read: "openai" (/v1, OpenAI's
    shape), "specchat" (/api, ``error_body``'s), or None for a page."""
    for prefix, api in (("/v1", "openai"), ("/api", "specchat")):
        if path == prefix or path.startswith(prefix + "/"):
            return api
    return None
