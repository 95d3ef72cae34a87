"""``--api-store``: an API request and its reply kept in the conversation history, as a chat of its own that the
page lists, searches and opens like any other."""

from __future__ import annotations

from engines import EngineInfo

from ..conversations.conversation import new_message, produced_by
from ..conversations.store import Store, title_of
from .requests import ChatRequest


def store_exchange(store: Store, chat: ChatRequest, info: EngineInfo, answer: str, thinking: str,
                   finish_reason: str, stats: dict) -> str:
    """Store the request's messages (their images too) and the reply as a new conversation; returns its id."""
    messages, parent = [], None
    for message in chat.messages:
        for image in message.images:
            store.put_attachment(image)
        stored = new_message(message.role, parent, message.content, images=[i.id for i in message.images])
        stored.update(thinking=message.reasoning, finish_reason="stop" if message.role == "assistant" else None)
        messages.append(stored)
        parent = stored["id"]
    reply = new_message("assistant", parent, answer, settings={**produced_by(info, chat.options), "source": "api"})
    reply.update(thinking=thinking, finish_reason=finish_reason, stats=stats)
    messages.append(reply)
    first = next((m.content for m in chat.messages if m.role == "user" and m.content), "")
    return store.create(title_of(first) or "API request", messages[0]["created_at"], reply["id"], messages)
