"""REST: the tools a reply may call, and their switches (webapp/tools/).

Servers come only from the MCP servers file or the command line, never from here: a page can switch a server
or tool on or off, and say a tool may run without asking. Off loopback (a tab on another machine, which
``--token`` lets in) it can only switch things off: turning a tool on, or letting it run unasked, needs a tab on
this machine.
"""

from __future__ import annotations

import ipaddress

from flask import Blueprint, current_app, jsonify, request
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ClientError, describe_validation, error_body

bp = Blueprint("tools", __name__, url_prefix="/api")


class ServerSwitch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    enabled: bool


class ToolSwitch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    enabled: bool | None = None
    always_allow: bool | None = None


@bp.errorhandler(ClientError)
def _client_error(exc: ClientError):
    return jsonify(error_body(exc.code, exc.message)), exc.status


def _tools():
    return current_app.extensions["tools"]


def _body(model: type[BaseModel], example: str) -> BaseModel:
    values = request.get_json(silent=True)
    if not isinstance(values, dict) or not values:
        raise ClientError("bad_json", f"Send a JSON object, e.g. {example}.")
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise ClientError("bad_tool_switch", f"Not changed: {describe_validation(exc)}. Send e.g. {example}.") \
            from None


def from_loopback() -> bool:
    try:
        address = ipaddress.ip_address((request.remote_addr or "").split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def _only_off(*switched_on: bool) -> None:
    if any(switched_on) and not from_loopback():
        raise ClientError("loopback_only", "From another machine tools can only be switched off: switch a tool "
                          "on, or let it run without asking, in a tab on the machine specchat runs on.", 403)


@bp.get("/tools")
def list_tools():
    return jsonify({"ok": True, **_tools().listing()})


@bp.patch("/tools/<server>")
def switch_server(server: str):
    body = _body(ServerSwitch, '{"enabled": false}')
    _only_off(body.enabled)
    return jsonify({"ok": True, "server": _tools().switch_server(server, body.enabled)})


@bp.patch("/tools/<server>/<tool>")
def switch_tool(server: str, tool: str):
    body = _body(ToolSwitch, '{"enabled": false} or {"always_allow": true}')
    _only_off(body.enabled is True, body.always_allow is True)
    return jsonify({"ok": True, "tool": _tools().switch_tool(server, tool, body.enabled, body.always_allow)})
