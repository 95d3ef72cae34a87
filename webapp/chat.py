"""One tab's chat: its conversation, and the reply being streamed to it."""

from __future__ import annotations

import logging
import threading
import uuid

import orjson

from engines import Answer, Done, EngineError, Message, Stats, Thinking, Turn, guarded

from . import protocol
from .errors import ClientError, error_frame
from .host import EngineHost

log = logging.getLogger(__name__)


class ChatSession:
    def __init__(self, ws, host: EngineHost):
        self._ws = ws
        self._host = host
        self._send_lock = threading.Lock()
        self._closed = False
        self.conversation_id = uuid.uuid4().hex
        self.messages: list[Message] = []
        self._turn: Turn | None = None
        self._pump: threading.Thread | None = None

    def send(self, frame: dict) -> None:
        """Thread-safe; a tab that went away is ignored (its handler cleans up)."""
        data = protocol.dumps(frame)
        with self._send_lock:
            if self._closed:
                return
            try:
                self._ws.send(data)
            except Exception:  # the socket is closing; the receive loop ends the session
                self._closed = True

    def hello(self) -> None:
        engine = self._host.engine_frame()
        self.send({
            "type": "hello",
            "protocol": protocol.PROTOCOL,
            "engine": engine["engine"],
            "spec": engine["spec"],
            "choices": engine["choices"],
            "deep_reset": engine["deep_reset"],
            "settings": self._host.settings.current.model_dump(),
        })

    def handle(self, raw: str | bytes) -> None:
        try:
            frame = protocol.parse(raw)
            getattr(self, f"_on_{frame.type}")(frame)
        except ClientError as exc:
            self.send(error_frame(exc.code, exc.message, _frame_id(raw)))

    def _on_chat(self, frame: protocol.ChatFrame) -> None:
        if self._turn is not None:
            raise ClientError("busy", "A reply is still streaming in this tab: stop it or wait, then send again.")
        turn = Turn(
            id=frame.id,
            conversation_id=self.conversation_id,
            messages=[*self.messages, Message("user", frame.text)],
            options=self._host.settings.current,
        )
        try:
            events = self._host.engine.stream(turn)
        except EngineError as exc:
            raise ClientError(exc.code, exc.message) from None
        self.messages.append(Message("user", frame.text))
        self._turn = turn
        self.send({"type": "start", "id": turn.id})
        self._pump = threading.Thread(target=self._forward, args=(turn, events), name=f"reply-{turn.id}", daemon=True)
        self._pump.start()

    def _forward(self, turn: Turn, events) -> None:
        """Send the reply's events; record what was said, whatever way it ends."""
        said = {"thinking": [], "answer": []}
        done = None
        try:
            for event in guarded(events):
                if isinstance(event, (Thinking, Answer)):
                    kind = "thinking" if isinstance(event, Thinking) else "answer"
                    said[kind].append(event.text)
                    self.send({"type": kind, "id": turn.id, "text": event.text})
                elif isinstance(event, Stats):
                    self.send({"type": "stats", "id": turn.id, "stats": event.values})
                elif isinstance(event, Done):
                    done = event
        finally:
            turn.cancel.set()
            self.messages.append(Message("assistant", "".join(said["answer"]), "".join(said["thinking"])))
            self._turn = None
            frame = {"type": "done", "id": turn.id, "finish_reason": done.finish_reason, "stats": done.stats}
            if done.error_code:
                frame["error"] = {"code": done.error_code, "message": done.error_message}
            self.send(frame)

    def _on_stop(self, frame: protocol.StopFrame) -> None:
        turn = self._turn
        if turn is None or turn.id != frame.id:
            raise ClientError("unknown_id", f"No reply with id {frame.id!r} is streaming: nothing to stop.")
        turn.cancel.set()

    def _on_settings(self, frame: protocol.SettingsFrame) -> None:
        self._host.update_settings(frame.values)

    def _on_switch_engine(self, frame: protocol.SwitchEngineFrame) -> None:
        self._host.switch_engine(frame.spec)

    def _on_reset_cache(self, frame: protocol.ResetCacheFrame) -> None:
        try:
            freed = self._host.engine.reset_cache(deep=frame.deep)
        except EngineError as exc:
            raise ClientError(exc.code, exc.message) from None
        self.send({"type": "cache_reset", "freed": freed})

    def _on_new_chat(self, frame: protocol.NewChatFrame) -> None:
        self.cancel(wait=True)
        self._host.engine.forget(self.conversation_id)
        self.conversation_id = uuid.uuid4().hex
        self.messages = []
        self.send({"type": "new_chat", "conversation": self.conversation_id})

    def cancel(self, wait: bool = False) -> None:
        turn, pump = self._turn, self._pump
        if turn is not None:
            turn.cancel.set()
        if wait and pump is not None:
            pump.join(timeout=10)

    def close(self) -> None:
        self.cancel(wait=True)
        with self._send_lock:
            self._closed = True
        self._host.engine.forget(self.conversation_id)


def _frame_id(raw) -> str | None:
    """The frame's id when one can be read, so the error lands next to its message."""
    try:
        value = orjson.loads(raw).get("id")
    except Exception:
        return None
    return value if isinstance(value, str) else None
