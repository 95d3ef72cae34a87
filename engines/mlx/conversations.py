"""Per-conversation prompt caches, so a long chat's next turn skips its history."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

MAX_CONVERSATIONS = 4


@dataclass
class ConversationCache:
    system_prompt: str
    state: Any = field(default=None)  # mlx_vlm PromptCacheState: the KV cache and the ids it holds
    decode: Any = field(default=None)  # specchat's own loop: a DecodeState
    ids: list[int] = field(default_factory=list)  # every token of the conversation so far
    images: tuple[str, ...] = ()  # the content (sha256) of the images whose placeholders ``ids`` hold, in order
    messages: int = 0  # messages (user + assistant) the ids cover
    closed: bool = True  # the ids end with an end-of-turn token
    tools: tuple[dict, ...] = ()  # the tools the ids offer the model (a change of them renders afresh)

    def nbytes(self) -> int:
        cache = getattr(self.state, "cache", None) or []
        own = self.decode.nbytes() if self.decode is not None else 0
        return own + sum(getattr(c, "nbytes", 0) or 0 for c in cache)


class ConversationCaches:
    """A small LRU: each entry holds a whole KV cache, so only a few are kept."""

    def __init__(self, limit: int = MAX_CONVERSATIONS):
        self._limit = limit
        self._entries: OrderedDict[str, ConversationCache] = OrderedDict()

    def get(self, conversation_id: str) -> ConversationCache | None:
        entry = self._entries.get(conversation_id)
        if entry is not None:
            self._entries.move_to_end(conversation_id)
        return entry

    def put(self, conversation_id: str, entry: ConversationCache) -> None:
        self._entries[conversation_id] = entry
        self._entries.move_to_end(conversation_id)
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)

    def drop(self, conversation_id: str) -> None:
        self._entries.pop(conversation_id, None)

    def clear(self) -> dict:
        freed = {
            "prompt_tokens": sum(len(e.ids) for e in self._entries.values()),
            "entries": len(self._entries),
            "bytes": sum(e.nbytes() for e in self._entries.values()),
        }
        self._entries.clear()
        return freed
