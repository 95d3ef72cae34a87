"""One tab's socket: protocol frames in, its conversation's frames out."""

from __future__ import annotations

import logging
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator

import orjson

from engines import EngineError, Event, Turn

from ..conversations.conversation import CONTINUABLE, Conversation, new_message, produced_by
from ..conversations.window import Window
from ..errors import ClientError, error_frame
from ..hosting.host import EngineHost
from ..measurement.race import start_race, start_sweep
from . import protocol
from .tools import from_loopback

log = logging.getLogger(__name__)


class ChatSession:
    """One tab's socket, attached to a conversation that outlives it."""

    # A tab that falls this far behind (characters of frames queued, not yet on its socket) is closed with
    # 1008: a consumer that stopped reading is never waited on.
    max_queued = 8 * 1024 * 1024
    # Seconds a tab closed for falling behind gets to read its close frame before its connection is cut.
    hang_up_after = 10.0

    def __init__(self, ws, host: EngineHost, conversation_id: str | None = None):
        self._ws = ws
        self._host = host
        # Frames wait here for the writer thread, the only one that writes this socket's frames, in order.
        self._pending: deque[str] = deque()
        self._pending_size = 0
        self._sending = False
        self._wake = threading.Condition()
        self._closed = False
        self._behind = False  # closed for falling behind: the writer sends the 1008
        self._hang_up: threading.Timer | None = None
        self.conversation, self._resumed = host.conversations.open(conversation_id)
        self._loopback = from_loopback()  # a tab on another machine cannot let a tool run without asking
        self._writer = threading.Thread(target=self._write_out, name="ws-writer", daemon=True)
        self._writer.start()

    def send(self, frame: dict) -> None:
        """Queue a frame for the tab; never blocks. Thread-safe; a tab that went away is ignored (its handler
        cleans up), one that fell too far behind is closed with 1008."""
        data = protocol.dumps(frame)
        with self._wake:
            if self._closed:
                return
            if self._pending_size + len(data) > self.max_queued:
                self._fall_behind()
                return
            self._pending.append(data)
            self._pending_size += len(data)
            self._wake.notify_all()

    def _fall_behind(self) -> None:
        """The tab stopped reading: drop what it has not got, close it with 1008; the caller holds ``_wake``."""
        log.warning("a tab fell %d characters of frames behind: closing it", self._pending_size)
        self._closed = self._behind = True
        self._pending.clear()
        self._pending_size = 0
        self._hang_up = threading.Timer(self.hang_up_after, self._cut)
        self._hang_up.daemon = True
        self._hang_up.start()
        self._wake.notify_all()

    def _cut(self) -> None:
        """Ends the connection of a tab that did not read its close in time (wakes a send stuck on it)."""
        try:
            self._ws.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass

    def _write_out(self) -> None:
        """The writer thread: the queued frames onto the socket, in order, until the session closes."""
        while True:
            with self._wake:
                self._sending = False
                self._wake.notify_all()  # for flush()
                while not self._pending and not self._closed:
                    self._wake.wait()
                if not self._pending:  # closed
                    behind = self._behind
                    break
                data = self._pending.popleft()
                self._pending_size -= len(data)
                self._sending = True
            try:
                self._ws.send(data)
            except Exception:  # the socket is closing; the receive loop ends the session
                with self._wake:
                    self._closed, self._sending = True, False
                    self._pending.clear()
                    self._pending_size = 0
                    self._wake.notify_all()
                return
        if behind:
            try:
                self._ws.close(1008, "too far behind: reload the page")
            except Exception:
                pass

    def flush(self, timeout: float) -> bool:
        """Wait until every queued frame is on the socket (or the session closed); True when done in time."""
        with self._wake:
            return self._wake.wait_for(lambda: self._closed or not (self._pending or self._sending), timeout)

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
            "api": engine["api"],
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
        said = new_message("user", parent, frame.text, images=frame.images)
        turn, window = conversation.turn(frame.id, parent, self._host.settings.current, said)
        self._reply(turn, window, [said, new_message("assistant", said["id"])])

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
        turn, window = conversation.turn(frame.id, target["parent"], self._host.settings.current)
        self._reply(turn, window, [new_message("assistant", target["parent"])])

    def _on_continue(self, frame: protocol.ContinueFrame) -> None:
        conversation = self._free_conversation()
        reply = conversation.find(conversation.current) if conversation.current else None
        if reply is None or reply["role"] != "assistant" or reply["finish_reason"] not in CONTINUABLE:
            raise ClientError("cannot_continue", "Only a reply that was stopped, cut at its length or interrupted "
                              "can go on: the current one was not. Send a message or regenerate instead.")
        turn, window = conversation.turn(frame.id, reply["id"], self._host.settings.current, continued=True)
        self._stream_into(turn, lambda events: conversation.go_on(turn, window, events, reply))

    def _reply(self, turn: Turn, window: Window, new: list[dict]) -> None:
        """Open the engine's stream, then store ``new`` (ending with the reply) and stream into it."""
        new[-1]["settings"] = produced_by(self._host.engine.info(), turn.options)
        self._stream_into(turn, lambda events: self.conversation.start(turn, window, events, new))

    def _stream_into(self, turn: Turn, begin: Callable[[Iterator[Event]], None]) -> None:
        """Open the engine's stream for ``turn`` and hand it to ``begin``; a refused ``begin`` (shutting down)
        closes it, so the engine is free again at once."""
        try:
            events = self._host.engine.stream(turn)
        except EngineError as exc:
            if exc.code == "busy" and self._host.api.state()["answering"]:
                raise ClientError("busy", "The model is answering a request from the API (/v1): send again when "
                                  "it is done.") from None
            raise ClientError(exc.code, exc.message) from None
        try:
            begin(events)
        except BaseException:
            events.close()
            raise

    def _free_conversation(self) -> Conversation:
        """The tab's conversation, when nothing streams in it or holds the engine."""
        if self.conversation.job is not None:
            raise ClientError("busy", "A reply is still streaming in this tab: stop it or wait, then send again.")
        if not self._host.yield_calibration():
            raise ClientError("busy", "A race or sweep is running: wait for it to finish, then send again.")
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

    def _on_tool_approval(self, frame: protocol.ToolApprovalFrame) -> None:
        if frame.decision == "always" and not self._loopback:
            raise ClientError("loopback_only", "From another machine a call can be allowed once or denied: let a "
                              "tool run without asking in a tab on the machine specchat runs on.")
        self.conversation.approve(frame.call, frame.decision)

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
        with self._wake:
            self._closed = True
            self._pending.clear()
            self._pending_size = 0
            self._wake.notify_all()
            hang_up = self._hang_up
        if hang_up is not None:
            hang_up.cancel()


def _frame_id(raw) -> str | None:
    """The frame's id when one can be read, so the error lands next to its message."""
    try:
        value = orjson.loads(raw).get("id")
    except Exception:
        return None
    return value if isinstance(value, str) else None
