"""Engines: models behind one interface that stream typed events."""

from .base import Engine, EngineInfo, Image, Message, Turn
from .errors import EngineBusy, EngineError, EngineNotReady, ModelNotFound
from .events import Answer, Delta, Done, Event, Stats, Thinking, ToolCall
from .options import GenerationOptions
from .runner import guarded

__all__ = [
    "Answer", "Delta", "Done", "Engine", "EngineBusy", "EngineError", "EngineInfo", "EngineNotReady", "Event",
    "GenerationOptions", "Image", "Message", "ModelNotFound", "Stats", "Thinking", "ToolCall", "Turn", "guarded",
]
