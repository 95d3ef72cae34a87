"""The interface every engine implements, and the request it receives."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .errors import EngineBusy, EngineError, EngineNotReady
from .events import Event, ToolCall
from .guard import BUSY, Claimed
from .options import GenerationOptions

log = logging.getLogger(__name__)
NO_VISION = ("This model cannot see images: load a checkpoint with its vision tower, e.g. Qwen/Qwen3.5-4B "
             "converted by mlx_vlm.convert, or remove the images and send again.")
State = Literal["starting", "loading", "ready", "error"]


@dataclass(frozen=True)
class Status:
    """An engine's state, its message and its progress, replaced whole so that a reader on another thread
    never sees the state of one moment with the message of another."""

    state: State
    message: str = ""
    progress: float | None = None


@dataclass(frozen=True)
class Image:
    """An image attached to a message, known by its content: two images are equal when their bytes are.

    ``data`` holds the file as uploaded (PNG, JPEG, WebP, GIF or BMP, already checked to decode);
    ``width``/``height`` are as displayed, after any EXIF rotation.
    """

    id: str
    sha256: str
    mime: str
    width: int
    height: int
    data: bytes = field(default=b"", repr=False, compare=False)

    def data_url(self) -> str:
        """The image as a ``data:`` URL, as OpenAI-compatible servers take it in an ``image_url`` part."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode()}"


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    reasoning: str = ""
    images: tuple[Image, ...] = ()  # a user message's images in the order they were attached, or a tool's result's
    tool_calls: tuple[ToolCall, ...] = ()  # an assistant message's calls, in the order it made them
    tool_call_id: str = ""  # a tool message: the call whose result ``content`` is


@dataclass
class Turn:
    """One reply to generate: the conversation so far ends with the user's message.

    With ``continued`` it ends with an unfinished assistant reply instead, which the
    engine goes on with (an engine that cannot raises ``EngineError``).
    """

    id: str
    conversation_id: str
    messages: list[Message]
    options: GenerationOptions
    cancel: threading.Event = field(default_factory=threading.Event)
    continued: bool = False
    # Functions the model may call, in OpenAI's shape ({"type": "function", "function": {"name", "description",
    # "parameters"}}), and whether it must ("required"), may ("auto") or must not ("none") call one, or which.
    tools: tuple[dict, ...] = ()
    tool_choice: str | dict = "auto"


@dataclass(frozen=True)
class Example:
    """A prompt the empty screen offers: the model answers it right (the answer contains ``expect``),
    with thinking on, and also with thinking off unless ``thinking`` says it needs thinking."""

    text: str
    expect: str
    thinking: bool = False

    def to_dict(self) -> dict:
        return {"text": self.text, "thinking": self.thinking}


def read_examples(folder: Path) -> tuple[Example, ...]:
    """The model's ``examples.json`` in ``folder`` (``[{"text", "expect", "thinking"}]``); none when it is
    missing, and none (with one log line) when it cannot be read: examples never stop a model loading."""
    path = folder / "examples.json"
    if not path.is_file():
        return ()
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
        return tuple(Example(str(item["text"]), str(item["expect"]), bool(item.get("thinking", False)))
                     for item in items)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return ()


@dataclass(frozen=True)
class EngineInfo:
    name: str
    model: str
    drafter: str | None
    state: State
    message: str = ""
    progress: float | None = None
    examples: tuple[Example, ...] = ()  # prompts the empty screen offers for this model
    drafter_note: str | None = None  # no drafter: why, and how to get one
    decode_loop_reason: str | None = None  # why every reply runs on mlx-vlm's loop (MLX engine), else None
    quantized_verify_ratio: float | None = None  # quantized body on a CPU: a 4-row product's time / a 1-row one's
    vision: bool = False  # the model can take images
    vision_note: str | None = None  # cannot see: why, and how to load a model that can
    tools: bool = False  # the engine passes tools to the model and reads its calls

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "model": self.model,
            "drafter": self.drafter,
            "state": self.state,
            "message": self.message,
            "progress": self.progress,
            "examples": [example.to_dict() for example in self.examples],
            "drafter_note": self.drafter_note,
            "decode_loop_reason": self.decode_loop_reason,
            "quantized_verify_ratio": self.quantized_verify_ratio,
            "vision": self.vision,
            "vision_note": self.vision_note,
            "tools": self.tools,
        }


class Engine(ABC):
    """A model behind one interface: load, stream typed events, reset, cancel, unload.

    ``stream`` yields ``Thinking``/``Answer`` deltas, live ``Stats`` and ends
    with exactly one ``Done`` once wrapped by ``engines.runner.guarded``. A
    second ``stream`` while one runs raises ``EngineBusy``. Setting
    ``turn.cancel`` stops generation within one token.

    The one-reply guard lives here, once: ``stream`` claims the engine and an
    engine's ``_stream`` only generates. The claim ends however the stream
    does: read to its end, failed, closed, or dropped unread.
    """

    name: str = "engine"
    supports_deep_reset = False  # reset_cache(deep=True) also drops caches kept outside memory

    def __init__(self) -> None:
        self._listeners: list[Callable[[EngineInfo], None]] = []
        self._status = Status("loading", "waiting to load")
        self._claim_lock = threading.Lock()
        self._active: Turn | None = None  # the turn that holds the engine
        # Seconds spent in each loading step of the latest load, in order (what a slow start spent its time on).
        self.load_phases: list[tuple[str, float]] = []
        self._phase_started: float | None = None

    def on_change(self, listener: Callable[[EngineInfo], None]) -> None:
        self._listeners.append(listener)

    def _set_state(self, state: State, message: str = "", progress: float | None = None) -> None:
        """Record the engine's state and tell every listener (the tabs)."""
        self._time_phase(state, message)
        self._status = Status(state, message, progress)
        log.info("engine %s: %s", self.name, describe_state(state, message))
        self._notify()

    def _time_phase(self, state: State, message: str) -> None:
        now = time.monotonic()
        if self._phase_started is not None:
            self.load_phases.append((self._status.message, now - self._phase_started))
        elif state == "loading":
            self.load_phases = []
        self._phase_started = now if state == "loading" else None
        if state == "ready" and self.load_phases:
            log.info("engine %s: ready in %.1f s (%s)", self.name, sum(s for _, s in self.load_phases),
                     ", ".join(f"{step} {s:.1f} s" for step, s in self.load_phases))

    def _notify(self) -> None:
        info = self.info()
        for listener in list(self._listeners):
            listener(info)

    @abstractmethod
    def info(self) -> EngineInfo: ...

    @abstractmethod
    def load(self, options: GenerationOptions) -> None:
        """Load the model (blocking); state goes loading → ready or error."""

    def stream(self, turn: Turn) -> Iterator[Event]:
        """Claim the engine for ``turn`` and return its events (raises ``EngineBusy`` while another reply
        holds it, ``EngineNotReady`` or another ``EngineError`` when ``turn`` cannot start)."""
        with self._claim_lock:
            self._check_startable(turn)
            if self._active is not None:
                raise EngineBusy(BUSY)
            self._active = turn
        try:
            events = self._stream(turn)
        except BaseException:
            self._release(turn)
            raise
        return Claimed(events, turn.cancel, lambda: self._release(turn))

    def _release(self, turn: Turn) -> None:
        with self._claim_lock:
            if self._active is turn:
                self._active = None

    @property
    def busy(self) -> bool:
        """Whether a reply holds the engine."""
        return self._active is not None

    def cancel_all(self) -> None:
        """Stop the reply that holds the engine, if any, at its next token."""
        active = self._active
        if active is not None:
            active.cancel.set()

    def _check_startable(self, turn: Turn) -> None:
        """Raise when ``turn`` cannot start now; called under the guard's lock."""
        status = self._status
        if status.state != "ready":
            raise EngineNotReady(f"The model is not ready ({status.state}: {status.message}). Wait for it to load.")
        if any(m.images for m in turn.messages):
            info = self.info()
            if not info.vision:
                raise EngineError(info.vision_note or NO_VISION, code="no_vision")
        if turn.tools and not self.info().tools:
            raise EngineError(f"The {self.name} engine does not call tools yet: turn tools off, or switch to an "
                              "engine that calls them.", code="no_tools")

    @abstractmethod
    def _stream(self, turn: Turn) -> Iterator[Event]:
        """Generate ``turn``'s events (the engine is already claimed for it)."""

    @abstractmethod
    def reset_cache(self, deep: bool = False) -> dict:
        """Drop cached prompts; return what was freed (prompt_tokens, entries, bytes).

        ``deep`` also drops caches kept outside memory (an engine with any says
        so with ``supports_deep_reset``).
        """

    def prepare(self, options: GenerationOptions) -> None:
        """Settings changed; an engine may get ready for them ahead of the next message."""

    def forget(self, conversation_id: str) -> None:
        """The conversation is gone: drop whatever was cached for it."""

    def prompt_size(self, messages: list[Message], options: GenerationOptions,
                    continued: bool = False) -> tuple[int, int] | None:
        """(tokens the prompt for ``messages`` takes, tokens the model holds), so a long conversation can drop
        its oldest turns; None when the engine cannot tell (then every turn is sent)."""
        return None

    def divergence_margin(self, messages: list[Message], options: GenerationOptions, off: Message,
                          on: Message) -> float | None:
        """Where two greedy replies to ``messages`` (``off``'s and ``on``'s, as said) first differ: the target's
        top-1 minus top-2 logit at that token, in ``off``'s context; a near-tie that two ways of computing
        round differently shows as a margin near 0. None when the engine cannot tell (daemon engines)."""
        return None

    @abstractmethod
    def unload(self) -> None: ...


def describe_state(state: State, message: str) -> str:
    """A log line's words: "unloaded", "loading the model", "ready", "error: Could not load …"."""
    if not message:
        return state
    if message == "unloaded" or message.split()[0] == state:
        return message
    return f"{state}: {message}"
