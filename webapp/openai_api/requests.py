"""A ``POST /v1/chat/completions`` body checked into a typed ``ChatRequest``, or an ``ApiError`` naming the field.

Every field that changes the output is honoured or refused by name: nothing is ignored silently. Fields a
request leaves out take the settings pane's values (so the API decodes as the page does, drafter included);
``reasoning_effort`` maps to a thinking budget (``EFFORT_BUDGETS``). ``tools`` are the client's own: the model's
calls come back for the client to run, and their results come in as ``tool`` messages.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Annotated, Literal, Union

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engines import GenerationOptions, Image, Message, ToolCall
from engines.tool_calls import read_arguments

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


class CalledFunction(_Model):
    name: str
    arguments: str


class ApiToolCall(_Model):
    id: str
    type: Literal["function"]
    function: CalledFunction


class ApiMessage(_Model):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[Part] | None = None
    name: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ApiToolCall] | None = None
    tool_call_id: str | None = None


class FunctionDef(_Model):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None


class ToolDef(_Model):
    type: Literal["function"]
    function: FunctionDef


class ChosenFunction(_Model):
    name: str


class NamedToolChoice(_Model):
    type: Literal["function"]
    function: ChosenFunction


class StreamOptions(_Model):
    include_usage: bool = False


class TemplateSwitches(_Model):
    enable_thinking: bool | None = None


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
    # Thinking switches other servers take (mlx-vlm, MTPLX, vLLM), so that their clients, specchat's own OpenAI
    # engine among them, decode here as they ask there: thinking off, or its budget.
    enable_thinking: bool | None = None
    chat_template_kwargs: TemplateSwitches | None = None
    thinking_budget: int | None = None
    speculative: bool | None = None
    draft_block_size: int | Literal["auto"] | None = None
    # Taken only at the value that changes nothing; anything else is refused by name (refusals below).
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    response_format: dict | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict | None = None
    tools: list[ToolDef] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
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
    tools: tuple[dict, ...] = ()
    tool_choice: str | dict = "auto"


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
    tools, choice = _tools(body)
    usage = bool(body.stream_options and body.stream_options.include_usage)
    return ChatRequest(body.model, messages, options, body.stream, usage, _stops(body.stop), tools, choice)


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
    budgets = [name for name in ("reasoning_effort", "reasoning_budget", "thinking_budget")
               if getattr(body, name) is not None]
    if len(budgets) > 1:
        raise ApiError(400, "invalid_value", f"Send one of {' and '.join(budgets)}, not both.", budgets[-1])
    if None not in (body.max_tokens, body.max_completion_tokens) and body.max_tokens != body.max_completion_tokens:
        raise ApiError(400, "invalid_value", "max_tokens and max_completion_tokens differ: send one of them.",
                       "max_completion_tokens")


def _tools(body: ChatCompletionBody) -> tuple[tuple[dict, ...], str | dict]:
    """The tools the model may call, in OpenAI's shape, and the choice; a choice naming no tool offered is refused."""
    tools = tuple(tool.model_dump(exclude_none=True) for tool in body.tools or ())
    choice = body.tool_choice or "auto"
    if isinstance(choice, NamedToolChoice):
        if choice.function.name not in {tool["function"]["name"] for tool in tools}:
            raise ApiError(400, "invalid_value", f"tool_choice names {choice.function.name!r}, which is not among "
                           "the tools sent.", "tool_choice")
        choice = choice.model_dump()
    elif choice == "required" and not tools:
        raise ApiError(400, "invalid_value", "tool_choice is \"required\" but no tools were sent.", "tool_choice")
    return tools, choice


def _messages(items: list[ApiMessage], vision: bool) -> tuple[str | None, list[Message]]:
    """(the system prompt from the leading system or developer messages, or None; the rest as Messages)."""
    system: list[str] = []
    messages: list[Message] = []
    called: set[str] = set()  # the ids of the calls made so far, which tool messages answer
    for n, item in enumerate(items):
        where = f"messages[{n}]"
        if item.role == "tool":
            if item.tool_call_id not in called:
                raise ApiError(400, "invalid_value", f"{where} answers tool call {item.tool_call_id!r}, which no "
                               "assistant message before it made.", f"{where}.tool_call_id")
            messages.append(Message("tool", _content(item, where, False)[0], tool_call_id=item.tool_call_id))
            continue
        if item.tool_call_id is not None:
            raise ApiError(400, "invalid_value", f"{where}: only tool messages carry a tool_call_id.",
                           f"{where}.tool_call_id")
        if item.tool_calls and item.role != "assistant":
            raise ApiError(400, "invalid_value", f"{where}: only assistant messages make tool calls.",
                           f"{where}.tool_calls")
        calls = tuple(_call(call, f"{where}.tool_calls[{k}]") for k, call in enumerate(item.tool_calls or ()))
        called.update(call.call for call in calls)
        text, images = _content(item, where, vision)
        if item.role in ("system", "developer"):
            if messages:
                raise ApiError(400, "invalid_value", f"{where} is a {item.role} message after the conversation "
                               "began: put system messages first.", f"{where}.role")
            system.append(text)
            continue
        if images and item.role != "user":
            raise ApiError(400, "invalid_value", f"{where}: only user messages can hold images.", f"{where}.content")
        messages.append(Message(item.role, text, item.reasoning_content or "", images, calls))
    if not messages or messages[-1].role not in ("user", "tool"):
        raise ApiError(400, "invalid_value", "The last message must be the user's or a tool's result: specchat "
                       "answers it.", "messages")
    return ("\n\n".join(system) if system else None), messages


def _call(call: ApiToolCall, where: str) -> ToolCall:
    read = read_arguments(call.id, call.function.name, call.function.arguments)
    if read.error:
        raise ApiError(400, "invalid_value", f"{where}.function.arguments: {read.error}", f"{where}.function.arguments")
    return read


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
    budget = body.thinking_budget if body.thinking_budget is not None else budget
    switches = body.chat_template_kwargs.enable_thinking if body.chat_template_kwargs else None
    if False in (body.enable_thinking, switches):
        budget = 0
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
        if field == "reasoning_budget":
            param = next(name for name in ("reasoning_effort", "thinking_budget", "reasoning_budget")
                         if getattr(body, name) is not None)
        raise ApiError(400, "invalid_value", f"{param}: {first['msg']}.", param) from None


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOPS or any(not s for s in stops):
        raise ApiError(400, "invalid_value", f"stop takes up to {MAX_STOPS} non-empty strings.", "stop")
    return tuple(stops)
