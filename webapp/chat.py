"""One tab's socket: protocol frames in, its conversation's frames out."""

from __future__ import annotations

import logging
import threading

import orjson

from engines import EngineError, Message, Turn

from . import protocol
from .conversation import CONTINUABLE, Conversation, new_message, produced_by
from .errors import ClientError, error_frame
from .host import EngineHost
from .race import start_race, start_sweep

log = logging.getLogger(__name__)


class ChatSession:
    """One tab's socket, attached to a conversation that outlives it."""

    def __init__(self, ws, host: EngineHost, conversation_id: str | None = None):
        self._ws = ws
        self._host = host
        self._send_lock = threading.Lock()
        self._closed = False
        self.conversation, self._resumed = host.conversations.open(conversation_id)

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
        """Greet the tab; a resumed conversation's latest reply follows (the rest of it live)."""
        engine = self._host.engine_frame()
        self.conversation.attach(self.send, {
            "type": "hello",
            "protocol": protocol.PROTOCOL,
            "engine": engine["engine"],
            "spec": engine["spec"],
            "choices": engine["choices"],
            "deep_reset": engine["deep_reset"],
            "baseline": engine["baseline"],
            "settings": self._host.settings.current.model_dump(),
            "conversation": self.conversation.id,
            "resumed": self._resumed,
        })

    def handle(self, raw: str | bytes) -> None:
        try:
            frame = protocol.parse(raw)
            getattr(self, f"_on_{frame.type}")(frame)
        except ClientError as exc:
            self.send(error_frame(exc.code, exc.message, _frame_id(raw)))

    def _on_chat(self, frame: protocol.ChatFrame) -> None:
        conversation = self._free_conversation()
        parent = conversation.parent_for(frame.parent, frame.parent_given)
        said = new_message("user", parent, frame.text)
        turn = conversation.turn(frame.id, [*conversation.history(parent), Message("user", frame.text)],
                                 self._host.settings.current)
        self._reply(turn, [said, new_message("assistant", said["id"])])

    def _on_regenerate(self, frame: protocol.RegenerateFrame) -> None:
        conversation = self._free_conversation()
        if frame.message is None:
            target = conversation.last_reply()
            if target is None:
                raise ClientError("unknown_message", "This conversation has no reply to regenerate yet: send a "
                                  "message first.")
        else:
            target = conversation.find(frame.message)
            if target is None or target["role"] != "assistant":
                raise ClientError("unknown_message", f"No reply {frame.message!r} in this conversation: regenerate "
                                  "one of its assistant messages.")
        # A sibling of the target: the same user message answered again, with the current settings.
        turn = conversation.turn(frame.id, conversation.history(target["parent"]), self._host.settings.current)
        self._reply(turn, [new_message("assistant", target["parent"])])

    def _on_continue(self, frame: protocol.ContinueFrame) -> None:
        conversation = self._free_conversation()
        reply = conversation.find(conversation.current) if conversation.current else None
        if reply is None or reply["role"] != "assistant" or reply["finish_reason"] not in CONTINUABLE:
            raise ClientError("cannot_continue", "Only a reply that was stopped, cut at its length or interrupted "
                              "can go on: the current one was not. Send a message or regenerate instead.")
        turn = conversation.turn(frame.id, conversation.history(reply["id"]), self._host.settings.current,
                                 continued=True)
        try:
            events = self._host.engine.stream(turn)
        except EngineError as exc:
            raise ClientError(exc.code, exc.message) from None
        conversation.go_on(turn, events, reply)

    def _reply(self, turn: Turn, new: list[dict]) -> None:
        """Open the engine's stream, then store ``new`` (ending with the reply) and stream into it."""
        new[-1]["settings"] = produced_by(self._host.engine.info(), turn.options)
        try:
            events = self._host.engine.stream(turn)
        except EngineError as exc:
            raise ClientError(exc.code, exc.message) from None
        self.conversation.start(turn, events, new)

    def _free_conversation(self) -> Conversation:
        """The tab's conversation, when nothing streams in it or holds the engine."""
        if self.conversation.job is not None:
            raise ClientError("busy", "A reply is still streaming in this tab: stop it or wait, then send again.")
        if self._host.exclusive.locked():
            raise ClientError("busy", "A race or calibration is running: wait for it to finish, then send again.")
        return self.conversation

    def _on_select(self, frame: protocol.SelectFrame) -> None:
        if self.conversation.job is not None:
            raise ClientError("busy", "A reply is still streaming in this tab: stop it or wait, then switch branch.")
        current = self.conversation.select(frame.message)
        self.send({"type": "selected", "message": frame.message, "current": current})

    def _on_race(self, frame: protocol.RaceFrame) -> None:
        start_race(self._host, self.conversation, frame)

    def _on_sweep(self, frame: protocol.SweepFrame) -> None:
        start_sweep(self._host, self.conversation, frame)

    def _on_stop(self, frame: protocol.StopFrame) -> None:
        job = self.conversation.job
        if job is None or job.id != frame.id:
            raise ClientError("unknown_id", f"No reply or race with id {frame.id!r} is streaming: nothing to stop.")
        job.cancel.set()

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
        """A new conversation for this tab; the old one stays stored."""
        old = self.conversation
        self._host.conversations.drop(old)  # while attached: a reply in flight ends with its done here
        old.detach(self.send)
        self.conversation, self._resumed = self._host.conversations.open(None)
        self.conversation.attach(self.send, {"type": "new_chat", "conversation": self.conversation.id})

    def close(self) -> None:
        """The socket is gone; its conversation, and a reply in flight, wait for the tab to return."""
        self.conversation.detach(self.send)
        with self._send_lock:
            self._closed = True


def _frame_id(raw) -> str | None:
    """The frame's id when one can be read, so the error lands next to its message."""
    try:
        value = orjson.loads(raw).get("id")
    except Exception:
        return None
    return value if isinstance(value, str) else None
