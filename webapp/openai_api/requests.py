"""A ``POST /v1/chat/completions`` body checked into a typed ``ChatRequest``, or an ``ApiError`` naming the field.

Every field that changes the output is honoured or refused by name: nothing is ignored silently. Fields a
request leaves out take the settings pane's values (so the API decodes as the page does, drafter included);
``reasoning_effort`` maps to a thinking budget (``EFFORT_BUDGETS``).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engines import GenerationOptions, Image, Message

from ..conversations.images import MAX_PER_MESSAGE, read_image
from ..errors import ClientError
from .errors import ApiError

# Thinking tokens per reply for each ``reasoning_effort``; "none" turns thinking off.
EFFORT_BUDGETS = {"none": 0, "minimal": 256, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768}
MAX_STOPS = 4
DATA_URL = re.compile(r"data:(image/[a-z0-9.+-]+)?(;[^,]*)?;base64,(.*)", re.S)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextPart(_Model):
    type: Literal["text"]
    text: str


class ImageUrl(_Model):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Model):
    type: Literal["image_url"]
    image_url: ImageUrl


Part = Annotated[Union[TextPart, ImagePart], Field(discriminator="type")]


class ApiMessage(_Model):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[Part] | None = None
    name: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None


class StreamOptions(_Model):
    include_usage: bool = False


class ChatCompletionBody(_Model):
    model: str
    messages: list[ApiMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    reasoning_effort: Literal[tuple(EFFORT_BUDGETS)] | None = None  # type: ignore[valid-type]
    # specchat's own, as the settings pane has them
    reasoning_budget: int | None = None
    speculative: bool | None = None
    draft_block_size: int | None = None
    # Taken only at the value that changes nothing; anything else is refused by name (refusals below).
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    response_format: dict | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict | None = None
    # Fields that never change the output.
    user: str | None = None
    metadata: dict | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None
    service_tier: str | None = None


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[Message]
    options: GenerationOptions
    stream: bool
    include_usage: bool
    stop: tuple[str, ...]


def parse_request(raw: bytes, settings: GenerationOptions, vision: bool) -> ChatRequest:
    """The body as a ``ChatRequest`` with the settings filled in; ``vision``: whether the model can see."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "invalid_json", f"The body is not valid JSON ({exc}).") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "The body must be a JSON object: see the OpenAI chat completions API.")
    try:
        body = ChatCompletionBody.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = _param(first["loc"])
        if first["type"] == "extra_forbidden":
            raise ApiError(400, "unsupported_parameter", f"specchat does not support {param!r}: leave it out "
                           "(docs/openai-api.md lists what it takes).", param) from None
        raise ApiError(400, "invalid_value", f"{param}: {first['msg']}.", param) from None
    _refuse_unsupported(body)
    system, messages = _messages(body.messages, vision)
    options = _options(body, settings, system)
    if body.seed is not None and options.temperature > 0:
        raise _refuse("seed", "sampling with a seed is not supported yet; send temperature 0 (greedy, the same "
                      "output every time) or leave seed out")
    return ChatRequest(body.model, messages, options, body.stream,
                       bool(body.stream_options and body.stream_options.include_usage), _stops(body.stop))


def _param(loc: tuple) -> str:
    """A pydantic location as OpenAI names a parameter: ``messages[1].content``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not re.fullmatch(r"[a-z_]+", str(part)):  # a union member's name (``str``, ``list[…]``): no field
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def _refuse(param: str, why: str) -> ApiError:
    return ApiError(400, "unsupported_parameter", f"specchat cannot honour {param}: {why}.", param)


def _refuse_unsupported(body: ChatCompletionBody) -> None:
    if body.n not in (None, 1):
        raise _refuse("n", "it makes one choice per request; send n: 1 or leave it out")
    if body.logprobs or body.top_logprobs:
        raise _refuse("logprobs", "it does not return log probabilities; leave logprobs and top_logprobs out")
    if body.response_format is not None and body.response_format != dict(type="text"):
        raise _refuse("response_format", "it does not constrain the output to a format; leave it out")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(body, name):
            raise _refuse(name, "it does not apply penalties; leave it out or send 0")
    if body.logit_bias:
        raise _refuse("logit_bias", "it does not bias tokens; leave it out")
    if body.tools or body.tool_choice not in (None, "none"):
        raise _refuse("tools", "this version of specchat does not call tools yet; leave tools and tool_choice out")
    if body.reasoning_effort is not None and body.reasoning_budget is not None:
        raise ApiError(400, "invalid_value", "Send reasoning_effort or reasoning_budget, not both.", "reasoning_budget")
    if None not in (body.max_tokens, body.max_completion_tokens) and body.max_tokens != body.max_completion_tokens:
        raise ApiError(400, "invalid_value", "max_tokens and max_completion_tokens differ: send one of them.",
                       "max_completion_tokens")


def _messages(items: list[ApiMessage], vision: bool) -> tuple[str | None, list[Message]]:
    """(the system prompt from the leading system or developer messages, or None; the rest as Messages)."""
    system: list[str] = []
    messages: list[Message] = []
    for n, item in enumerate(items):
        where = f"messages[{n}]"
        if item.role == "tool" or item.tool_calls or item.tool_call_id:
            raise _refuse(where, "this version of specchat does not call tools yet, so a conversation cannot hold "
                          "tool calls or tool messages")
        text, images = _content(item, where, vision)
        if item.role in ("system", "developer"):
            if messages:
                raise ApiError(400, "invalid_value", f"{where} is a {item.role} message after the conversation "
                               "began: put system messages first.", f"{where}.role")
            system.append(text)
            continue
        if images and item.role != "user":
            raise ApiError(400, "invalid_value", f"{where}: only user messages can hold images.", f"{where}.content")
        messages.append(Message(item.role, text, item.reasoning_content or "", images))
    if not messages or messages[-1].role != "user":
        raise ApiError(400, "invalid_value", "The last message must be the user's: specchat answers it.",
                       "messages")
    return ("\n\n".join(system) if system else None), messages


def _content(item: ApiMessage, where: str, vision: bool) -> tuple[str, tuple[Image, ...]]:
    if item.content is None or isinstance(item.content, str):
        return item.content or "", ()
    texts, images = [], []
    for k, part in enumerate(item.content):
        if isinstance(part, TextPart):
            texts.append(part.text)
            continue
        param = f"{where}.content[{k}].image_url"
        if not vision:
            raise ApiError(400, "no_vision", "The loaded model cannot see images: load a checkpoint with its "
                           "vision tower, or send text only.", param)
        images.append(_image(part.image_url.url, param))
    if len(images) > MAX_PER_MESSAGE:
        raise ApiError(400, "invalid_value", f"{where} holds {len(images)} images; at most {MAX_PER_MESSAGE} a "
                       "message.", f"{where}.content")
    return "\n".join(texts), tuple(images)


def _image(url: str, param: str) -> Image:
    found = DATA_URL.fullmatch(url.strip())
    if found is None:
        raise ApiError(400, "invalid_image", "specchat takes images as base64 data URLs "
                       "(data:image/png;base64,…), not addresses to fetch.", param)
    try:
        data = base64.b64decode(found.group(3), validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "invalid_image", "The image's data URL is not valid base64.", param) from None
    try:
        return read_image(data).as_image()
    except ClientError as exc:
        raise ApiError(413 if exc.code == "image_too_large" else 400, exc.code, exc.message, param) from None


def _options(body: ChatCompletionBody, settings: GenerationOptions, system: str | None) -> GenerationOptions:
    values: dict = {"system_prompt": system or ""}
    limit = body.max_completion_tokens or body.max_tokens
    budget = EFFORT_BUDGETS[body.reasoning_effort] if body.reasoning_effort is not None else body.reasoning_budget
    given = {"max_tokens": limit, "temperature": body.temperature, "top_p": body.top_p, "reasoning_budget": budget,
             "speculative": body.speculative, "draft_block_size": body.draft_block_size}
    values.update({key: value for key, value in given.items() if value is not None})
    if isinstance(values.get("temperature"), int):
        values["temperature"] = float(values["temperature"])
    if isinstance(values.get("top_p"), int):
        values["top_p"] = float(values["top_p"])
    try:
        return settings.updated(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "value"
        param = {"max_tokens": "max_completion_tokens" if body.max_completion_tokens else "max_tokens",
                 "system_prompt": "messages"}.get(field, field)
        if field == "reasoning_budget" and body.reasoning_effort is not None:
            param = "reasoning_effort"
        raise ApiError(400, "invalid_value", f"{param}: {first['msg']}.", param) from None


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOPS or any(not s for s in stops):
        raise ApiError(400, "invalid_value", f"stop takes up to {MAX_STOPS} non-empty strings.", "stop")
    return tuple(stops)
