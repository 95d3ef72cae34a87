"""The websocket route: one long-lived socket per tab."""

from __future__ import annotations

from flask import current_app, request
from flask_sock import Sock

from .chat import ChatSession

sock = Sock()


@sock.route("/ws")
def chat_socket(ws):
    host = current_app.extensions["specchat"]
    # A tab that reconnects names its conversation, to get it back with any reply still in flight.
    session = ChatSession(ws, host, request.args.get("conversation"))
    try:
        host.join(session)
        while True:
            raw = ws.receive()
            if raw is None:
                break
            session.handle(raw)
    finally:
        host.remove(session)
        session.close()
