"""Errors in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status a client
expects, so every OpenAI client library raises its own error type with specchat's message."""

from __future__ import annotations

TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
         409: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error", 500: "server_error",
         503: "server_error"}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.headers = headers or {}

    def body(self) -> dict:
        return error_body(self.status, self.code, self.message, self.param)


def error_body(status: int, code: str, message: str, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"), "param": param,
                      "code": code}}
