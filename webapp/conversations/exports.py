"""A stored conversation as a file: lossless JSON (the whole tree with its images, importable again) or readable
Markdown (which links its images)."""

from __future__ import annotations

import base64
import binascii
from typing import Literal

import orjson

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engines.block_policy import block_label

from ..errors import ClientError, describe_validation
from .images import MAX_PER_MESSAGE, Attachment, read_image
from .store import parse_time, title_of

FORMAT = "specchat.conversation"
VERSION = 1
FINISH_REASONS = ("stop", "length", "cancelled", "error", "interrupted", "tool_calls")


def export_json(conversation: dict, attachments: dict[str, dict]) -> dict:
    """The whole tree, every field as stored, and its images (``attachments``, by id, with ``data``) embedded
    as base64, byte for byte."""
    embedded = {id: {**{k: v for k, v in row.items() if k not in ("id", "data")},
                     "data": base64.b64encode(row["data"]).decode()} for id, row in attachments.items()}
    return {"format": FORMAT, "version": VERSION, **conversation, "attachments": embedded}


class ImportedPosition(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    thinking: int = Field(ge=0)
    content: int = Field(ge=0)


class ImportedToolCall(BaseModel):
    """A reply's call as stored (webapp/conversations/tool_steps.py)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    call: str = Field(min_length=1, max_length=200)
    name: str
    server: str | None
    arguments: dict
    state: Literal["waiting", "running", "done", "failed", "denied"]
    ok: bool | None = None
    content: list[dict] = Field(default_factory=list)
    ms: float | int | None = None
    error: str | None = None
    at: ImportedPosition
    step: int | None = Field(default=None, ge=0)  # absent in exports made before steps were numbered

    @field_validator("content")
    @classmethod
    def _result_parts(cls, parts: list[dict]) -> list[dict]:
        """Text and image parts as a call's result holds them (results.py), each image checked as an upload is."""
        for n, part in enumerate(parts):
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                continue
            if part.get("type") != "image" or not isinstance(part.get("mime_type"), str):
                raise ValueError(f"part {n} is neither a text part ({{type, text}}) nor an image part "
                                 "({type, data, mime_type}): export the conversation again")
            try:
                read_image(base64.b64decode(part.get("data") or "", validate=True), normalize=False)
            except (binascii.Error, ValueError, TypeError):
                raise ValueError(f"part {n}'s data is not base64: export the conversation again") from None
            except ClientError as exc:
                raise ValueError(f"part {n}: {exc.message}") from None
        return parts


class ImportedMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    id: str = Field(min_length=1, max_length=200)
    parent: str | None
    role: Literal["user", "assistant"]
    content: str
    thinking: str = ""
    finish_reason: Literal[FINISH_REASONS] | None = None  # type: ignore[valid-type]
    stats: dict | None = None
    settings: dict | None = None
    created_at: str
    images: list[str] = Field(default_factory=list, max_length=MAX_PER_MESSAGE)
    tool_calls: list[ImportedToolCall] = Field(default_factory=list)

    @field_validator("created_at")
    @classmethod
    def _a_stored_time(cls, value: str) -> str:
        parse_time(value)  # a ValueError names the expected form
        return value


class ImportedAttachment(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)  # its other fields follow from the bytes

    sha256: str
    data: str  # base64


class ImportedConversation(BaseModel):
    """An export, checked whole before anything is stored."""

    model_config = ConfigDict(extra="ignore", strict=True)  # the export's own id and dates are not kept

    format: Literal[FORMAT]  # type: ignore[valid-type]
    version: Literal[VERSION]  # type: ignore[valid-type]
    title: str | None = Field(None, max_length=1000)
    created_at: str | None = None
    current: str | None = None
    messages: list[ImportedMessage] = Field(min_length=1)
    attachments: dict[str, ImportedAttachment] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _a_tree(self) -> "ImportedConversation":
        seen: set[str] = set()
        for n, message in enumerate(self.messages):
            if message.id in seen:
                raise ValueError(f"messages.{n}.id {message.id!r} appears twice")
            if message.parent is not None and message.parent not in seen:
                raise ValueError(f"messages.{n}.parent {message.parent!r} is not the id of an earlier message")
            seen.add(message.id)
        if self.current is not None and self.current not in seen:
            raise ValueError(f"current {self.current!r} is not the id of one of the messages")
        for n, message in enumerate(self.messages):
            missing = next((id for id in message.images if id not in self.attachments), None)
            if missing is not None:
                raise ValueError(f"messages.{n}.images names {missing!r}, which attachments does not hold")
        return self


def parse_import(body) -> ImportedConversation:
    if not isinstance(body, dict):
        raise ClientError("bad_import", "Send a conversation export as JSON (what GET "
                          "/api/conversations/<id>/export?format=json returns).")
    try:
        return ImportedConversation.model_validate(body)
    except ValidationError as exc:
        raise ClientError("bad_import", f"Not a specchat conversation export: {describe_validation(exc)}.") from None


def imported_images(export: ImportedConversation) -> list[Attachment]:
    """The export's images, each checked as an upload is and against its id and hash, kept byte for byte."""
    found = []
    for id, embedded in export.attachments.items():
        try:
            data = base64.b64decode(embedded.data, validate=True)
        except (binascii.Error, ValueError):
            raise ClientError("bad_import", f"attachments.{id}.data is not base64: export the conversation "
                              "again.") from None
        try:
            attachment = read_image(data, normalize=False)
        except ClientError as exc:
            raise ClientError("bad_import", f"attachments.{id}: {exc.message}") from None
        if (attachment.id, attachment.sha256) != (id, embedded.sha256):
            raise ClientError("bad_import", f"attachments.{id} holds other bytes than its id and sha256 say: "
                              "the export was changed; export the conversation again.")
        found.append(attachment)
    return found


def imported(export: ImportedConversation) -> tuple[str, str, str, list[dict]]:
    """(title, created_at, current, messages) to store; a reply exported mid-stream reads ``interrupted``."""
    messages = [m.model_dump() for m in export.messages]
    for message in messages:
        if message["role"] == "assistant" and message["finish_reason"] is None:
            message["finish_reason"] = "interrupted"
    first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
    title = export.title if export.title is not None else title_of(first_user)
    return title, export.created_at or messages[0]["created_at"], export.current or messages[-1]["id"], messages


def branch_markdown(conversation: dict, branch: list[dict]) -> str:
    """The branch on screen, readable: each reply says what produced it, thinking folds away."""
    lines = [f"# {conversation['title'] or 'Conversation'}", "", f"*{conversation['created_at']}*", ""]
    for message in branch:
        if message["role"] == "user":
            lines += ["## You", ""]
            lines += [f"![image {n}](/api/attachments/{id})" for n, id in enumerate(message.get("images") or (), 1)]
            lines += ([""] if message.get("images") else []) + [message["content"], ""]
            continue
        lines += [f"## Assistant{_produced_by(message)}", ""]
        if message["thinking"]:
            lines += ["<details><summary>Thinking</summary>", "", message["thinking"].strip(), "", "</details>", ""]
        for call in message.get("tool_calls") or ():
            said = " ".join(part["text"] for part in call["content"] if part.get("type") == "text")
            shown = sum(part.get("type") == "image" for part in call["content"])  # the JSON export keeps them
            arguments = orjson.dumps(call["arguments"]).decode()
            images = f" ({shown} image{'' if shown == 1 else 's'})" if shown else ""
            lines += [f"> Called `{call['name']}` ({call['server'] or 'unknown'}) with `{arguments}`: {call['state']}"
                      + (f", {said}" if said else "") + images, ""]
        lines += [message["content"], ""]
        if message["finish_reason"] not in (None, "stop"):
            lines += [f"*({message['finish_reason']})*", ""]
    return "\n".join(lines)


def _produced_by(message: dict) -> str:
    settings = message.get("settings") or {}
    if not settings:
        return ""
    parts = [settings.get("model") or settings.get("engine") or ""]
    if settings.get("speculative"):
        # On "auto", with the block it ran most: "block auto (4)".
        history = (message.get("stats") or {}).get("block_history")
        parts.append(f"drafter on · block {block_label(settings.get('draft_block_size'), history)}")
    else:
        parts.append("drafter off")
    parts.append(f"budget {settings.get('reasoning_budget')}")
    return " · " + " · ".join(p for p in parts if p)
