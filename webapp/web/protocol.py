"""Websocket protocol v1: client frames parsed into typed objects at the boundary."""

from __future__ import annotations

from typing import Annotated, Literal, Union

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from ..conversations.images import MAX_PER_MESSAGE
from ..errors import ClientError, describe_validation

PROTOCOL = 1
MAX_FRAME_BYTES = 1 << 20
CONTEST_ID = r"^[A-Za-z0-9_-]+$"  # a race's id names its receipt file
Block = Annotated[int, Field(ge=1, le=16)]


class _Frame(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


MessageId = Annotated[str, Field(min_length=1, max_length=200)]
AttachmentId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]  # an id POST /api/attachments returned
Images = Annotated[list[AttachmentId], Field(max_length=MAX_PER_MESSAGE)]


class _WithImages(_Frame):
    """A message's text and images: either may be empty, not both."""

    text: str = ""
    images: Images = Field(default_factory=list)

    @model_validator(mode="after")
    def _says_something(self):
        if not self.text and not self.images:
            raise ValueError("send some text, images, or both")
        if len(set(self.images)) != len(self.images):
            raise ValueError("attach each image once")
        return self


class ChatFrame(_WithImages):
    type: Literal["chat"]
    id: str = Field(min_length=1, max_length=200)
    parent: MessageId | None = None  # left out: after the current leaf; null: a new first message

    @property
    def parent_given(self) -> bool:
        return "parent" in self.model_fields_set


class RegenerateFrame(_Frame):
    type: Literal["regenerate"]
    id: str = Field(min_length=1, max_length=200)
    message: MessageId | None = None  # the reply to answer anew; default the current branch's last


class ContinueFrame(_Frame):
    type: Literal["continue"]
    id: str = Field(min_length=1, max_length=200)


class SelectFrame(_Frame):
    type: Literal["select"]
    message: MessageId


class StopFrame(_Frame):
    type: Literal["stop"]
    id: str = Field(min_length=1, max_length=200)


class SettingsFrame(_Frame):
    type: Literal["settings"]
    values: dict


class SwitchEngineFrame(_Frame):
    type: Literal["switch_engine"]
    spec: dict


class ResetCacheFrame(_Frame):
    type: Literal["reset_cache"]
    deep: bool = False


class NewChatFrame(_Frame):
    type: Literal["new_chat"]


class ToolApprovalFrame(_Frame):
    """The user's decision on a call that waits for one: run it this once, always run this tool, or not."""

    type: Literal["tool_approval"]
    call: str = Field(min_length=1, max_length=200)
    decision: Literal["once", "always", "deny"]


class _ContestFrame(_WithImages):
    id: str = Field(min_length=1, max_length=200, pattern=CONTEST_ID)
    runs: int | Literal["auto"] = 1  # "auto": pairs until they settle the speed-up (pairs.py)
    greedy: bool = True  # temperature 0 for every lane; false samples with the current settings


    @field_validator("runs", mode="before")
    @classmethod
    def _runs(cls, runs: object) -> object:
        if runs != "auto" and (type(runs) is not int or not 1 <= runs <= 9):
            raise ValueError('use 1 to 9 runs, or "auto" to add pairs until the speed-up is settled')
        return runs


class RaceFrame(_ContestFrame):
    type: Literal["race"]
    parent: MessageId | None = None  # as chat's

    @property
    def parent_given(self) -> bool:
        return "parent" in self.model_fields_set


class SweepFrame(_ContestFrame):
    type: Literal["sweep"]
    blocks: list[Block | Literal["auto"]] = Field(default_factory=lambda: [1, 2, 3, 4, 5, 6], min_length=1,
                                                  max_length=17)

    @field_validator("blocks")
    @classmethod
    def _distinct_with_baseline(cls, blocks: list[int | str]) -> list[int | str]:
        if len(set(blocks)) != len(blocks):
            raise ValueError("list each block size once")
        if 1 not in blocks:
            raise ValueError("include block 1 (the drafter off), the baseline for speed-up")
        return blocks


ClientFrame = Annotated[
    Union[ChatFrame, StopFrame, SettingsFrame, SwitchEngineFrame, ResetCacheFrame, NewChatFrame, RaceFrame,
          SweepFrame, RegenerateFrame, SelectFrame, ContinueFrame, ToolApprovalFrame],
    Field(discriminator="type"),
]
_adapter = TypeAdapter(ClientFrame)
TYPES = ("chat", "stop", "settings", "switch_engine", "reset_cache", "new_chat", "race", "sweep", "regenerate",
         "select", "continue", "tool_approval")


def parse(raw: str | bytes) -> ClientFrame:
    """A typed frame, or ClientError with a message that says what to send instead."""
    if isinstance(raw, bytes):
        raise ClientError("bad_frame", "Binary frames are not supported: send JSON text frames.")
    size = len(raw) if raw.isascii() else len(raw.encode())
    if size > MAX_FRAME_BYTES:
        raise ClientError("too_large", f"Frame of {size} bytes is over the 1 MiB limit: send a shorter message.")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ClientError("bad_json", f"Frame is not valid JSON ({exc}).") from None
    if not isinstance(data, dict):
        raise ClientError("bad_frame", 'A frame must be a JSON object with a "type" field.')
    kind = data.get("type")
    if kind not in TYPES:
        what = "missing" if kind is None else f"unknown ({kind!r})"
        raise ClientError("bad_type", f'Frame "type" is {what}: use one of {", ".join(TYPES)}.')
    try:
        return _adapter.validate_python(data)
    except ValidationError as exc:
        raise ClientError("bad_frame", f"Invalid {kind} frame: {describe_validation(exc)}.") from None


def dumps(frame: dict) -> str:
    return orjson.dumps(frame).decode()
