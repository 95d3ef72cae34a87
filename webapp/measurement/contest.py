"""What a race or block sweep is given, as the fields it reads: the tab's request (web/protocol.py parses it from a
``race`` or ``sweep`` frame) and the parts of the app's host it uses (hosting/host.py's EngineHost). Neither layer
is imported: they stand above this one and hand their objects down."""

from __future__ import annotations

import threading
from typing import Protocol

from engines import Engine, GenerationOptions
from engines.registry import EngineSpec

from ..conversations.conversation import Conversations
from .baseline import Baselines
from .receipts import Receipts


class ContestAsked(Protocol):
    """A race's or sweep's request: its text and images, the runs and whether every lane is greedy."""

    id: str
    text: str
    images: list[str]
    runs: int | str
    greedy: bool


class RaceAsked(ContestAsked, Protocol):
    parent: str | None

    @property
    def parent_given(self) -> bool:
        """Whether the request named its parent (else the race follows the current leaf)."""


class SweepAsked(ContestAsked, Protocol):
    blocks: list[int | str]  # draft blocks, "auto" among them


class Settings(Protocol):
    @property
    def current(self) -> GenerationOptions:
        """The settings every tab shares now."""


class ContestHost(Protocol):
    """The app's engine and stores, the lock a contest holds the engine by, and the engine frame it sends every
    tab once it stored a new baseline."""

    settings: Settings
    receipts: Receipts
    baselines: Baselines
    conversations: Conversations
    exclusive: threading.Lock

    @property
    def engine(self) -> Engine:
        """The engine in use."""

    @property
    def spec(self) -> EngineSpec:
        """What the engine in use is, as its receipt names it."""

    @property
    def api(self):
        """The OpenAI-compatible API's queue: whether it is answering a request (``state()["answering"]``)."""

    def yield_calibration(self) -> bool:
        """End a running calibration so that the contest goes first; whether the engine is free now."""

    def broadcast_engine(self) -> None:
        """Send every tab the engine's state."""
