"""A chat's history and its reply (or race) in flight, kept when the tab's socket drops.

A reply goes on while its tab reconnects; the reconnected tab is sent the
reply's frames so far (its "backlog") and then the rest live, so an answer is
never lost to a network blip or a reload.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from engines import Answer, Done, Engine, Message, Thinking, Turn, guarded

from .errors import ClientError
from .frames import reply_frame

REPLY_FRAMES = ("start", "thinking", "answer", "stats", "done", "race_done", "sweep_done")
KEEP_DETACHED_S = 15 * 60
MAX_CONVERSATIONS = 32
REATTACH_WAIT_S = 2.0


class Job(Protocol):
    """What streams in a conversation: a reply (a ``Turn``) or a race; ``cancel`` stops it."""

    id: str
    cancel: threading.Event


class Conversation:
    def __init__(self, closing: threading.Event | None = None) -> None:
        self.id = uuid.uuid4().hex
        self._closing = closing or threading.Event()  # set when the server shuts down: no new jobs
        self.messages: list[Message] = []
        self.job: Job | None = None
        self._pump: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sink: Callable[[dict], None] | None = None
        self._backlog: list[dict] = []  # the latest job's frames, for a tab that reattaches
        self.detached_at: float | None = time.monotonic()

    @property
    def attached(self) -> bool:
        return self._sink is not None

    def attach(self, sink: Callable[[dict], None], greeting: dict) -> None:
        """Send ``greeting`` then the latest job's frames so far; later frames follow live, in order."""
        with self._lock:
            self._sink, self.detached_at = sink, None
            sink(greeting)
            for frame in self._backlog:
                sink(frame)

    def detach(self, sink: Callable[[dict], None]) -> None:
        with self._lock:
            if self._sink == sink:  # bound methods are equal, never identical
                self._sink, self.detached_at = None, time.monotonic()

    def emit(self, frame: dict) -> None:
        with self._lock:
            if frame["type"] == "stats" and self._backlog and self._backlog[-1]["type"] == "stats":
                self._backlog[-1] = frame  # only the latest numbers matter on replay
            elif frame["type"] in REPLY_FRAMES:
                self._backlog.append(frame)
            if self._sink is not None:
                self._sink(frame)

    def start(self, turn: Turn, events) -> None:
        """Stream a reply to ``turn``, whose last message is the user's."""
        self.begin(turn, turn.messages[-1], lambda: self._forward(turn, events))

    def begin(self, job: Job, said: Message, work: Callable[[], tuple[Message, dict]]) -> None:
        """Run ``work`` on its own thread; it emits its frames as it goes and returns the reply for the
        history and its last frame, which is sent once the conversation is free for the next message."""
        pump = threading.Thread(target=self._run, args=(job, work), name=f"reply-{job.id}", daemon=True)
        # Under the lock: cancel() never sees a job whose thread has not started, and a job either
        # starts before shutdown looks (and is stopped, its done sent) or is refused.
        with self._lock:
            if self._closing.is_set():
                raise ClientError("shutting_down", "specchat is shutting down: start it again, then send again.")
            self._backlog = []
            self.messages.append(said)
            self.job, self._pump = job, pump
            pump.start()

    def _run(self, job: Job, work: Callable[[], tuple[Message, dict]]) -> None:
        reply, last = Message("assistant", ""), None
        try:
            reply, last = work()
        finally:
            job.cancel.set()
            self.messages.append(reply)
            self.job = None
            if last is not None:
                self.emit(last)

    def _forward(self, turn: Turn, events) -> tuple[Message, dict]:
        """Send the reply's events; what was said is recorded whatever way it ends."""
        said = {Thinking: [], Answer: []}
        tag = {"id": turn.id}
        self.emit({"type": "start", **tag})
        for event in guarded(events):
            if isinstance(event, (Thinking, Answer)):
                said[type(event)].append(event.text)
            if not isinstance(event, Done):
                self.emit(reply_frame(event, tag))
        # guarded() ends with exactly one Done: the last event.
        return Message("assistant", "".join(said[Answer]), "".join(said[Thinking])), reply_frame(event, tag)

    def cancel(self, wait: bool = False, timeout: float = 10) -> None:
        with self._lock:
            job, pump = self.job, self._pump
        if job is not None:
            job.cancel.set()
        if wait and pump is not None:
            pump.join(timeout=timeout)


class Conversations:
    """Open conversations by id; a detached one is kept a while for its tab to come back."""

    def __init__(self, engine: Callable[[], Engine]):
        self._engine = engine
        self._lock = threading.Lock()
        self._all: OrderedDict[str, Conversation] = OrderedDict()
        self._closing = threading.Event()

    def open(self, wanted: str | None) -> tuple[Conversation, bool]:
        """The detached conversation ``wanted`` (resumed), or a new one.

        A reloaded tab can be back before the server noticed its old socket
        close, so a conversation still attached gets a moment to come free.
        """
        deadline = time.monotonic() + REATTACH_WAIT_S
        while True:
            with self._lock:
                found = self._all.get(wanted) if wanted else None
                if found is None or not found.attached or time.monotonic() > deadline:
                    stale = self._expire()
                    found = self._all.get(wanted) if wanted else None
                    resumed = found is not None and not found.attached
                    if not resumed:
                        found = Conversation(self._closing)
                        self._all[found.id] = found
                    break
            time.sleep(0.02)
        for conversation in stale:
            conversation.cancel()
            self._engine().forget(conversation.id)
        return found, resumed

    def drop(self, conversation: Conversation) -> None:
        conversation.cancel(wait=True)
        with self._lock:
            self._all.pop(conversation.id, None)
        self._engine().forget(conversation.id)

    def close(self, timeout: float = 10) -> None:
        """Refuse new jobs, stop every job and wait until each sent its last frame."""
        self._closing.set()
        conversations = self.all()
        for conversation in conversations:
            conversation.cancel()
        deadline = time.monotonic() + timeout
        for conversation in conversations:
            conversation.cancel(wait=True, timeout=max(0.0, deadline - time.monotonic()))

    def all(self) -> list[Conversation]:
        with self._lock:
            return list(self._all.values())

    def _expire(self) -> list[Conversation]:
        """Remove conversations detached too long, or the oldest detached past the limit."""
        now = time.monotonic()
        detached = [c for c in self._all.values() if c.detached_at is not None]
        stale = {c.id: c for c in detached if now - c.detached_at > KEEP_DETACHED_S}
        stale.update((c.id, c) for c in detached[: max(0, len(self._all) - MAX_CONVERSATIONS)])
        for conversation_id in stale:
            del self._all[conversation_id]
        return list(stale.values())
