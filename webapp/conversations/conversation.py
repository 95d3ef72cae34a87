"""A chat's stored tree of messages and its reply (or race) in flight, kept when the tab's socket drops.

A reply goes on while its tab reconnects; the reconnected tab is sent the
reply's frames so far (its "backlog") and then the rest live, so an answer is
never lost to a network blip or a reload. Every message is stored as it
happens (the reply while it streams), so neither is it lost to a restart.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from engines import Answer, Done, Engine, EngineInfo, GenerationOptions, Image, Message, Thinking, Turn
from engines.cancel import Relay

from ..errors import ClientError
from .frames import reply_frame
from .store import Store, new_id, now
from .tool_replay import replayed
from .tool_steps import Approvals, Offer, ReplyJob, ToolSteps
from .window import Window, fit

log = logging.getLogger(__name__)

REPLY_FRAMES = ("start", "thinking", "answer", "stats", "tool_call", "tool_result", "done", "race_done",
                "sweep_done")
KEEP_DETACHED_S = 15 * 60
MAX_CONVERSATIONS = 32
REATTACH_WAIT_S = 2.0
SAVE_EVERY_S = 0.5  # a streaming reply is written at least this often: a killed process loses less than this
RECORDED_SETTINGS = ("speculative", "draft_block_size", "reasoning_budget", "temperature", "top_p", "max_tokens")


class Watch(Protocol):
    """Started where a reply starts (measurement/busy.py's CpuWatch, which the host passes in)."""

    def result(self) -> dict | None:
        """Where the reply ends: how much of the CPU other work took meanwhile (``{percent, flagged,
        threshold}``), or None where that cannot be told."""


class Job(Protocol):
    """What streams in a conversation: a reply (a ``Turn``) or a race; ``cancel`` stops it."""

    id: str
    cancel: threading.Event


@dataclass
class Said:
    """How a job's reply ended: what it said, and its last frame (sent once the conversation is free)."""

    content: str = ""
    thinking: str = ""
    finish_reason: str = "error"
    stats: dict | None = None
    last: dict | None = None
    tool_calls: list[dict] | None = None  # the reply's calls as stored (tool_steps.py)


CONTINUABLE = ("cancelled", "length", "interrupted")  # replies ``continue`` may go on with


def new_message(role: str, parent: str | None, content: str = "", settings: dict | None = None,
                images: list[str] | None = None) -> dict:
    """A message as stored; an assistant message is streaming (no ``finish_reason``) until its reply ends.
    ``images``: ids of stored attachments, in order."""
    return {"id": new_id(), "parent": parent, "role": role, "content": content, "thinking": "",
            "finish_reason": None, "stats": None, "settings": settings, "created_at": now(),
            "images": list(images or ()), "tool_calls": []}


def text_length(parts: list[str]) -> int:
    """The length of the text ``parts`` make, as the page counts it (UTF-16 code units), so that it cuts the
    text where a tool call happened."""
    return sum(len(part.encode("utf-16-le")) for part in parts) // 2


def produced_by(info: EngineInfo, options: GenerationOptions) -> dict:
    """What produced a reply, stored with it."""
    return {"engine": info.name, "model": info.model, "drafter": info.drafter,
            **{key: getattr(options, key) for key in RECORDED_SETTINGS}}


def said_by_engine(messages: list[dict]) -> list[dict]:
    """The stored messages of a branch the engine gets. A reply that ended in an error is left out: the user
    saw it fail, so the model must not take it as a complete reply (it would build on a broken answer)."""
    return [m for m in messages if not (m["role"] == "assistant" and m["finish_reason"] == "error")]


def as_message(stored: dict, images: Mapping[str, Image]) -> Message:
    """A stored message as the engine gets it; ``images`` holds (at least) its images by id."""
    return Message(stored["role"], stored["content"], stored["thinking"],
                   tuple(images[id] for id in stored.get("images") or ()))


def seen_blind(messages: list[Message]) -> list[Message]:
    """The conversation as a model that cannot see gets it: earlier turns' images left out (their text stays, so
    a chat goes on after a switch to such a model); the message it answers keeps its own, which it refuses."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return [m if i == last or not m.images else replace(m, images=()) for i, m in enumerate(messages)]


def stored_images(store: Store, ids: list[str]) -> dict[str, Image]:
    """The stored images ``ids`` name, with their bytes; an id not stored is refused, named."""
    found = store.attachments(ids)
    missing = next((id for id in ids if id not in found), None)
    if missing is not None:
        raise ClientError("unknown_attachment", f"No image {missing!r} is stored: upload it with POST "
                          "/api/attachments (the page does so as you attach it), then send its id.")
    return {id: Image(id, row["sha256"], row["mime"], row["width"], row["height"], row["data"])
            for id, row in found.items()}


class Autosave:
    """Writes a streaming reply's text so far every ``SAVE_EVERY_S`` on a thread of its own: a killed process
    loses at most that much of it (also while the engine stalls), and the reply's thread never waits on
    the disk, so streaming goes at the engine's speed."""

    def __init__(self, write: Callable[[str, str], None], answer: list[str], thinking: list[str]):
        self._write, self._answer, self._thinking = write, answer, thinking
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autosave", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        saved = (0, 0)
        while not self._closed.wait(SAVE_EVERY_S):
            answer, thinking = list(self._answer), list(self._thinking)  # copies: the lists grow meanwhile
            if (len(answer), len(thinking)) != saved:
                self._write("".join(answer), "".join(thinking))
                saved = (len(answer), len(thinking))

    def close(self) -> None:
        self._closed.set()
        self._thread.join()


class Conversation:
    def __init__(self, store: Store, engine: Callable[[], Engine], watch: Callable[[], Watch],
                 id: str | None = None, current: str | None = None, closing: threading.Event | None = None,
                 tools: Callable[[], object] = lambda: None):
        self.id = id or new_id()
        self._tools = tools  # the app's ToolBox (webapp/tools/), or None
        self._offer = Offer({})  # the tools the latest turn offers the model
        self.approvals = Approvals()  # the user's decisions on the calls that wait for one
        self._closing = closing or threading.Event()  # set when the server shuts down: no new jobs
        self.current = current  # the leaf of the branch on screen; None before the first message
        self.job: Job | None = None
        self._store = store
        self._engine = engine
        self._watch = watch
        self._pump: threading.Thread | None = None
        self._lock = threading.Lock()
        self._sink: Callable[[dict], None] | None = None
        self._backlog: list[dict] = []  # the latest job's frames, for a tab that reattaches
        self.detached_at: float | None = time.monotonic()
        # The engine caches a conversation by id and expects each turn to extend the last one; a turn on
        # another branch (or after a failed reply) gets a fresh id, so no cache is reused for it.
        self._turns = 0
        self.engine_id = f"{self.id}-0"
        self._engine_saw: list[Message] | None = None
        self.window = Window()  # the part of the conversation the model saw last

    # The tree

    def find(self, message: str) -> dict | None:
        return next((m for m in self._store.messages(self.id) if m["id"] == message), None)

    def context_messages(self, leaf: str | None) -> int:
        """How many messages of the branch ending at ``leaf`` the engine gets (their images are not read)."""
        return len(said_by_engine(self._store.branch(self.id, leaf)))

    def _as_messages(self, stored: list[dict], vision: bool) -> tuple[list[Message], list[str]]:
        """The engine's messages for ``stored``, and each one's stored id (a reply that called tools is several
        messages, as the model saw it: tool_replay.py)."""
        images = stored_images(self._store, [id for m in stored for id in m.get("images") or ()])
        messages, ids = [], []
        for m in stored:
            said = (replayed(m["content"], m["thinking"], m["tool_calls"], vision)
                    if m["role"] == "assistant" and m.get("tool_calls") else [as_message(m, images)])
            messages += said
            ids += [m["id"]] * len(said)
        return messages, ids

    def parent_for(self, requested: str | None, given: bool) -> str | None:
        """The message a new user message follows: the current leaf unless ``given``; a given None starts a
        new first message (an edit of the first one)."""
        if not given:
            return self.current
        if requested is None:
            return None
        found = self.find(requested)
        if found is None:
            raise ClientError("unknown_message", f"No message {requested!r} in this conversation: answer after "
                              "one of its messages, or leave parent out to follow the current branch.")
        if found["role"] != "assistant":
            raise ClientError("bad_parent", f"Message {requested!r} is the user's: a user message follows a reply. "
                              "To edit a user message, send the edit with that message's parent.")
        return requested

    def last_reply(self) -> dict | None:
        """The last assistant message of the current branch."""
        return next((m for m in reversed(self._store.branch(self.id, self.current)) if m["role"] == "assistant"),
                    None)

    def select(self, message: str) -> str:
        """Show the branch through ``message``, down to its newest leaf; returns that leaf."""
        messages = self._store.messages(self.id)
        if not any(m["id"] == message for m in messages):
            raise ClientError("unknown_message", f"No message {message!r} in this conversation: select one of "
                              "the ids from GET /api/conversations/<id>.")
        newest_child = {m["parent"]: m["id"] for m in messages}  # in insertion order: the last child wins
        leaf = message
        while leaf in newest_child:
            leaf = newest_child[leaf]
        self._store.set_current(self.id, leaf)
        self.current = leaf
        return leaf

    def turn(self, id: str, leaf: str | None, options: GenerationOptions, said: dict | None = None,
             continued: bool = False) -> tuple[Turn, Window]:
        """A reply to the branch ending at ``leaf`` followed by the user's new message ``said`` (or ending
        with the unfinished reply to go on with), its oldest turns dropped when the model's context cannot
        hold them all, under the engine conversation its history fits."""
        messages, window = self.fitted(leaf, options, said, continued)
        history = messages if continued else messages[:-1]
        if self._engine_saw is not None and history != self._engine_saw:
            self.new_engine_id()  # another branch, a failed reply, or a window moved on: nothing cached fits
        box = self._tools()
        offered = box is not None and options.tools and self._engine().info().tools
        self._offer = Offer.of(box.available() if offered else [])
        turn = Turn(id=id, conversation_id=self.engine_id, messages=messages, options=options, continued=continued,
                    tools=self._offer.functions())
        return turn, window

    def fitted(self, leaf: str | None, options: GenerationOptions, said: dict | None = None,
               continued: bool = False) -> tuple[list[Message], Window]:
        """The branch ending at ``leaf`` (then ``said``) as the engine gets it, cut to what its context holds."""
        stored = said_by_engine(self._store.branch(self.id, leaf)) + ([said] if said else [])
        vision = self._engine().info().vision
        messages, ids = self._as_messages(stored, vision)
        if not vision:
            messages = seen_blind(messages)
        return fit(self._engine(), messages, ids, options, continued, self.window)

    def new_engine_id(self) -> None:
        """Start afresh in the engine, which forgets the old one's cache."""
        old, self._turns = self.engine_id, self._turns + 1
        self.engine_id, self._engine_saw = f"{self.id}-{self._turns}", None
        self._engine().forget(old)

    # Frames

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

    # Jobs

    def start(self, turn: Turn, window: Window, events, new: list[dict]) -> None:
        """Stream a reply to ``turn`` into the last of the ``new`` messages (stored first)."""
        def engine_saw(said: Said) -> None:
            # A reply that called tools was seen as steps: a next turn is given the same (tool_replay.py).
            vision = self._engine().info().vision
            self._engine_saw = [*turn.messages, *replayed(said.content, said.thinking, said.tool_calls or [], vision)]

        self.window = window
        job = ReplyJob.of(turn)
        self.begin(job, new, lambda: self._forward(turn, job.cancel, events, new[-1], window.dropped), engine_saw)

    def go_on(self, turn: Turn, window: Window, events, reply: dict) -> None:
        """Stream the rest of an unfinished stored ``reply`` into it (``turn`` is continued)."""
        def engine_saw(said: Said) -> None:
            self._engine_saw = [*turn.messages[:-1], Message("assistant", said.content, said.thinking)]

        self.window = window
        job = ReplyJob.of(turn)
        self.begin(job, [reply], lambda: self._forward(turn, job.cancel, events, reply, window.dropped), engine_saw,
                   stored=True)

    def begin(self, job: Job, new: list[dict], work: Callable[[], Said],
              after: Callable[[Said], None] | None = None, stored: bool = False) -> None:
        """Store ``new`` (the user's message and the reply, or just a reply; ``stored``: already there) and
        run ``work`` on its own thread; it emits its frames as it goes and returns what the reply said,
        which ``after`` gets."""
        pump = threading.Thread(target=self._run, args=(job, new[-1]["id"], work, after),
                                name=f"reply-{job.id}", daemon=True)
        # Under the lock: cancel() never sees a job whose thread has not started, and a job either
        # starts before shutdown looks (and is stopped, its done sent) or is refused.
        with self._lock:
            if self._closing.is_set():
                raise ClientError("shutting_down", "specchat is shutting down: start it again, then send again.")
            self._backlog = []
            try:
                if not stored:
                    self._store.add(self.id, new, current=new[-1]["id"])
            except sqlite3.Error:  # a failing disk must not cost the user the reply on screen
                log.exception("storing conversation %s failed", self.id)
            self.current = new[-1]["id"]
            self.job, self._pump = job, pump
            pump.start()

    def _run(self, job: Job, message: str, work: Callable[[], Said], after: Callable[[Said], None] | None) -> None:
        said = Said()
        try:
            said = work()
        finally:
            job.cancel.set()
            self._write(self._store.finish_reply, message, said.content, said.thinking, said.finish_reason,
                        said.stats, said.tool_calls)
            if after is not None:
                after(said)
            self.job = None
            if said.last is not None:
                self.emit(said.last)

    def _write(self, write: Callable, *args) -> None:
        try:
            write(self.id, *args)
        except sqlite3.Error:
            log.exception("storing conversation %s failed", self.id)

    def _forward(self, turn: Turn, stop: Relay, events, reply: dict, dropped: int) -> Said:
        """Send the reply's events and store what it says as it goes; recorded whatever way it ends.
        ``dropped``: the oldest user turns the model did not see (they no longer fit its context)."""
        said = {Thinking: [reply["thinking"]], Answer: [reply["content"]]}  # a continued reply keeps its start
        tag = {"id": turn.id, "message": reply["id"]}
        start = {"type": "start", **tag, "parent": reply["parent"], "dropped_turns": dropped}
        if turn.continued:  # what the reply said before, so a tab that reloads meanwhile shows it whole
            start["continued_from"] = {"content": reply["content"], "thinking": reply["thinking"]}
        self.emit(start)
        autosave = Autosave(lambda answer, thinking: self._write(self._store.save_reply, reply["id"], answer,
                                                                 thinking), said[Answer], said[Thinking])
        watch = self._watch()  # how much of the CPU other work took meanwhile: a caveat on the reply's rate
        steps = ToolSteps(turn, stop, events, self._engine, self._tools(), self._offer, self.approvals, self.emit, tag,
                          lambda: {"thinking": text_length(said[Thinking]), "content": text_length(said[Answer])},
                          lambda calls: self._write(self._store.save_tool_calls, reply["id"], calls))
        try:
            for event in steps.events():
                if isinstance(event, (Thinking, Answer)):
                    said[type(event)].append(event.text)
                if not isinstance(event, Done):
                    self.emit(reply_frame(event, tag))
        finally:
            autosave.close()  # before the final write, which no later save may overtake
        # The steps end with exactly one Done (guarded() on each): the last event.
        last = reply_frame(event, tag)
        last["stats"] = {**event.stats, "dropped_turns": dropped, "busy": watch.result()}
        stats = {**last["stats"], "error": last["error"]} if "error" in last else last["stats"]
        return Said("".join(said[Answer]), "".join(said[Thinking]), event.finish_reason, stats, last, steps.calls)

    def approve(self, call: str, decision: str) -> None:
        """The user's ``decision`` on a call that waits for one in this conversation's reply."""
        if not self.approvals.decide(call, decision):
            raise ClientError("unknown_call", f"No call {call!r} waits for approval in this conversation: it was "
                              "decided already, or the reply ended.")

    def cancel(self, wait: bool = False, timeout: float = 10) -> None:
        with self._lock:
            job, pump = self.job, self._pump
        if job is not None:
            job.cancel.set()
        if wait and pump is not None:
            pump.join(timeout=timeout)


class Conversations:
    """Open conversations by id; a detached one is kept a while for its tab to come back, and a stored one
    is opened again from the store."""

    def __init__(self, engine: Callable[[], Engine], store: Store, watch: Callable[[], Watch],
                 tools: Callable[[], object] = lambda: None):
        self._engine = engine
        self._watch = watch
        self._tools = tools
        self.store = store
        self._lock = threading.Lock()
        self._all: OrderedDict[str, Conversation] = OrderedDict()
        self._closing = threading.Event()

    def open(self, wanted: str | None) -> tuple[Conversation, bool]:
        """The detached or stored conversation ``wanted`` (resumed), or a new one.

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
                    if found is None and wanted:
                        head = self.store.head(wanted)
                        if head is not None:
                            found, resumed = Conversation(self.store, self._engine, self._watch, wanted,
                                                         head["current"], self._closing, self._tools), True
                            self._all[wanted] = found
                    if not resumed:
                        found = Conversation(self.store, self._engine, self._watch, closing=self._closing,
                                             tools=self._tools)
                        self._all[found.id] = found
                    break
            time.sleep(0.02)
        for conversation in stale:
            conversation.cancel()
            self._engine().forget(conversation.engine_id)
        return found, resumed

    def drop(self, conversation: Conversation) -> None:
        """Close ``conversation`` here (it stays stored)."""
        conversation.cancel(wait=True)
        with self._lock:
            if self._all.get(conversation.id) is conversation:
                del self._all[conversation.id]
        self._engine().forget(conversation.engine_id)

    def delete(self, id: str) -> bool:
        """Delete a stored conversation; a tab that has it open goes on with an empty one of the same id."""
        with self._lock:
            open_ = self._all.get(id)
        if open_ is not None:
            open_.cancel(wait=True)
            open_.current = None
            open_.new_engine_id()
        return self.store.delete(id)

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
        now_ = time.monotonic()
        detached = [c for c in self._all.values() if c.detached_at is not None]
        stale = {c.id: c for c in detached if now_ - c.detached_at > KEEP_DETACHED_S}
        stale.update((c.id, c) for c in detached[: max(0, len(self._all) - MAX_CONVERSATIONS)])
        for conversation_id in stale:
            del self._all[conversation_id]
        return list(stale.values())
