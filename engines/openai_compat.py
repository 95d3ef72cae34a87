"""Any OpenAI-compatible chat server (mlx-vlm, mlx-lm, llama.cpp, LM Studio, Ollama /v1, vLLM, SGLang).

Reasoning arrives as ``delta.reasoning_content``, ``delta.reasoning`` or inline
``<think>`` tags in ``content``; all of it becomes ``Thinking``. Speed and draft
numbers come from the server when it sends them (``usage``, llama.cpp-style
``timings``) and are measured here otherwise.

The reasoning budget is a hard bound. Thinking is switched on or off per
request (``enable_thinking`` and ``chat_template_kwargs``), and the budget is
sent as ``thinking_budget`` for servers that close thinking there themselves
(mlx-vlm). A server that thinks on past the budget is cut there: its stream is
closed and a second request asks for the answer, with the thinking so far as
the reply's closed reasoning (an assistant message the server continues where
it can, ``continue_final_message``). ``max_tokens`` bounds the answer the same
way. The final stats say which bound applied (``budget_bound``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import httpx
import orjson

from .base import NO_VISION, Engine, EngineInfo, Message, Turn
from .batching import DeltaBatch
from .errors import EngineBusy, EngineError, EngineNotReady
from .events import Answer, Done, Event, Stats, Thinking
from .options import GenerationOptions
from .repetition import RepetitionGuard
from .sse import (IMAGES_HINT, Cancelled, EventStream, as_text, connect_error, error_detail, http_error,
                  open_event_stream, send_cancellable)
from .stats import StatsMeter
from .thinking import ThinkSplitter
from .tool_calls import ToolCallAssembler, images_after_tools, openai_tool_calls

log = logging.getLogger(__name__)
DEFAULT_STALL_S = 60.0  # longer than any keep-alive interval in use (MTPLX 5 s, llama.cpp 30 s)
MODELS_TIMEOUT_S = 10.0  # GET /models is instant on a healthy server
# A server's tokenizer is not at hand: a prompt is taken as one token per 3 UTF-8 bytes (more tokens than
# English text takes, about what code or other scripts take) plus a message's framing, so an estimate errs
# towards dropping a turn early rather than overflowing the server's context.
BYTES_PER_TOKEN = 3
FRAMING_TOKENS = 8
# An image as Qwen-VL-style processors take it: a token per 32×32 pixels after resizing to at most about a
# megapixel; counted up to twice that, again erring towards dropping a turn early.
IMAGE_PIXELS_PER_TOKEN = 32 * 32
IMAGE_ESTIMATE_PIXELS = 2 * 1024 * 1024
CONTEXT_KEYS = ("max_model_len", "context_length", "max_context_length")  # where servers' /models say it
# mlx-vlm writes two thinking tokens past its budget (the one that crossed it, then a newline) before
# ``</think>``: it is told this much less, so its thinking ends at the budget.
SERVER_CLOSE_TOKENS = 2
CONFLICT_RETRY_S = 0.1  # a cut request's session may still be busy on the server for a moment
CONFLICT_RETRIES = 30


def message_body(message: Message) -> dict:
    """A message as the server takes it: its text as a string, or with images, a text part then one
    ``image_url`` part (a data URL) per image, in the order they were attached; an assistant's calls as
    ``tool_calls``, and a tool's result with the call it answers (its text only: the API takes no images in a
    tool message, ``images_after_tools`` sends them in a user message after it)."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.tool_calls:
        return {"role": "assistant", "content": message.content or None,
                "tool_calls": openai_tool_calls(message.tool_calls)}
    if not message.images:
        return {"role": message.role, "content": message.content}
    parts = [{"type": "text", "text": message.content}] if message.content else []
    parts += [{"type": "image_url", "image_url": {"url": image.data_url()}} for image in message.images]
    return {"role": message.role, "content": parts}


def image_tokens(image) -> int:
    """An estimate of the tokens ``image`` takes in a prompt (see ``IMAGE_ESTIMATE_PIXELS``)."""
    return -(-min(image.width * image.height, IMAGE_ESTIMATE_PIXELS) // IMAGE_PIXELS_PER_TOKEN)


def has_images(turn: Turn) -> bool:
    return any(m.images for m in turn.messages)


def says_vision(entry: dict) -> bool | None:
    """Whether a /models entry says its model takes images (MTPLX's ``supports_vision``, or an ``image``
    among ``modalities.input``); None when it does not say."""
    if isinstance(entry.get("supports_vision"), bool):
        return entry["supports_vision"]
    modalities = entry.get("modalities")
    inputs = modalities.get("input") if isinstance(modalities, dict) else None
    return "image" in inputs if isinstance(inputs, list) else None


def as_int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def as_float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Bounded(Exception):
    """The next token would pass a bound: the stream is cut before it."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind  # "budget" (thinking) or "answer" (max_tokens)


class ReplyReader:
    """Turns one reply's chunks into events and stats; raises EngineError when it must end, and
    Bounded when thinking or the answer would pass its bound."""

    def __init__(self, options: GenerationOptions, server: str, images: bool = False):
        self.options = options
        self.server = server
        self.images = images  # the request carries images
        self.meter = StatsMeter()
        self.pending: list[Event] = []
        self.deltas = DeltaBatch(self.pending.append)
        self.splitter = ThinkSplitter()
        self.guard = RepetitionGuard()
        self.finish: str | None = None
        self.calls = ToolCallAssembler()
        self.chunks = 0
        self.reported: dict = {}  # numbers the server sent, in the stats dict's keys
        self.skipped = 0  # malformed SSE lines
        self.draft_kind: str | None = None  # the server's drafter, when its timings name one (mlx-vlm)
        self.server_counts = False  # the server reports token counts as it goes (MTPLX progress frames)
        self.told_budget = False  # the server was sent the budget to close thinking at
        self.cut = False  # thinking was cut at the budget; the answer comes from a second request
        self.carried_thinking = 0  # thinking tokens of the cut request
        self._reasoning: list[str] = []
        self._kept_thinking = 0  # thinking tokens counted up to the last thinking text passed on

    def feed(self, chunk: dict) -> list[Event]:
        self.chunks += 1
        self._check_error(chunk)
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            # mlx-vlm sends the same text in both fields: read one.
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._add(Thinking(reasoning))
                self.splitter.after_thinking()
            content = delta.get("content")
            if isinstance(content, str) and content:
                for event in self.splitter.feed(content):
                    self._add(event)
            self.calls.feed(delta.get("tool_calls"))
            if isinstance(choice.get("finish_reason"), str):
                self.finish = choice["finish_reason"]
        self.read_usage(chunk.get("usage"))
        self.read_timings(chunk.get("timings"))
        self.read_extra(chunk)
        if self.meter.first_token_at is not None and self.meter.live_due():
            self.deltas.flush()
            self.pending.append(Stats(self.snapshot()))
        return self.take()

    def take(self) -> list[Event]:
        out = self.pending[:]
        self.pending.clear()
        return out

    def finish_text(self) -> list[Event]:
        for event in self.splitter.flush():
            self._add(event)
        self.deltas.flush()
        return self.take()

    @property
    def reasoning(self) -> str:
        return "".join(self._reasoning)

    def _add(self, event: Thinking | Answer) -> None:
        thinking = isinstance(event, Thinking)
        count = 0 if self.server_counts else 1  # else the progress frames have counted it already
        if thinking and self.meter.thinking_tokens + count > self.options.reasoning_budget:
            raise Bounded("budget")
        if not thinking and self.meter.answer_tokens + count > self.options.max_tokens:
            raise Bounded("answer")
        self.meter.token(thinking, count)
        if thinking:
            self._reasoning.append(event.text)
            self._kept_thinking = self.meter.thinking_tokens
        if thinking and self.guard.feed(event.text):
            self.deltas.add(event)
            raise EngineError(
                f"The model's thinking kept repeating the line \u201c{self.guard.triggered_line[:120]}\u201d, "
                "so the reply was stopped. Send again, perhaps with a slightly higher temperature.", "repetition",
            )
        self.deltas.add(event)

    def _check_error(self, chunk: dict) -> None:
        error = chunk.get("error")
        choices = chunk.get("choices")
        errored = isinstance(choices, list) and any(
            isinstance(c, dict) and c.get("finish_reason") == "error" for c in choices
        )
        if error is None and not errored:
            return
        if isinstance(error, dict):
            detail = as_text(str(error.get("message") or error.get("code") or "no detail"))
            code = error.get("code")
        else:
            detail, code = (as_text(str(error)) if error else "no detail"), None
        if code == "insufficient_memory":
            hint = " Start a new chat or shorten it."
        elif self.images and not self.meter.tokens:  # most likely on the images (mlx-vlm on a model that cannot see)
            hint = " " + IMAGES_HINT
        else:
            hint = " Send again."
        raise EngineError(f"{self.server} stopped the reply with an error: {detail.rstrip('.')}.{hint}", "server_error")

    def cut_thinking(self) -> list[Event]:
        """Thinking reached the budget: what it held goes out, and the rest of the reply is the answer."""
        if self.server_counts:  # the counts ran ahead to the text that was cut
            self.meter.thinking_tokens = self._kept_thinking
        events = self.finish_text()
        self.meter.end_thinking()
        self.cut, self.carried_thinking, self.finish = True, self.meter.thinking_tokens, None
        self.reported.pop("tok_s", None)  # a server's rate would cover the answer alone: the meter times both
        self.splitter = ThinkSplitter()
        self.splitter.after_thinking()
        return events

    def budget_bound(self) -> str:
        """How the budget held: ``cut`` here, closed by the ``server`` it was sent to, or ``none`` reached."""
        if self.cut:
            return "cut"
        reached = self.options.reasoning_budget and self.meter.thinking_tokens >= self.options.reasoning_budget
        return "server" if reached and self.told_budget and self.meter.answer_tokens else "none"

    def read_usage(self, usage) -> None:
        if not isinstance(usage, dict):
            return
        prompt, completion = as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))
        cached = as_int((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
        reasoning = as_int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens"))
        if prompt is not None and not self.cut:
            self.reported["prompt_tokens"] = prompt
        if cached is not None:
            self.reported["cached_tokens"] = cached
        if prompt is not None and self.cut:
            # The answer request's prompt holds the reasoning too: the first request's count is the reply's.
            self.reported.setdefault("prompt_tokens", prompt)
        if completion is not None:
            carried = self.carried_thinking
            thinking = reasoning if reasoning is not None else min(self.meter.thinking_tokens - carried, completion)
            # The token that closed thinking is counted by the server but is neither thinking nor answer.
            closed = 1 if thinking and completion > thinking else 0
            answer = completion - thinking - closed
            self.reported.update(tokens=carried + thinking + answer, thinking_tokens=carried + thinking,
                                 answer_tokens=answer)

    def read_timings(self, timings) -> None:
        if not isinstance(timings, dict):
            return
        speed = as_float(timings.get("predicted_per_second"))
        if speed and not self.cut:
            self.reported["tok_s"] = round(speed, 1)
        if isinstance(timings.get("draft_kind"), str):
            self.draft_kind = timings["draft_kind"]
        drafted, accepted = as_int(timings.get("draft_n")), as_int(timings.get("draft_n_accepted"))
        if drafted is not None and accepted is not None:
            self.reported.update(drafted=drafted, accepted=accepted)
        # specchat's API sends these beside llama.cpp's names.
        by_depth = timings.get("acceptance_by_depth")
        if isinstance(by_depth, list) and all(as_float(a) is not None or a is None for a in by_depth):
            self.reported["acceptance_by_depth"] = by_depth
        if as_int(timings.get("rounds")) is not None:
            self.reported["rounds"] = as_int(timings["rounds"])
        if "prompt_tokens" not in self.reported and as_int(timings.get("prompt_n")) is not None:
            self.reported["prompt_tokens"] = as_int(timings["prompt_n"])
        prompt_ms = as_float(timings.get("prompt_ms"))
        # The first request's prompt is the reply's; its time includes the vision tower's, which servers do not
        # report apart (0: not measured).
        if prompt_ms and not self.cut:
            self.reported["prefill_ms"] = round(prompt_ms, 1)

    def read_extra(self, chunk: dict) -> None:
        """Server-specific fields; the MTPLX engine reads its progress and stats here."""

    def snapshot(self) -> dict:
        stats = self.meter.snapshot()
        stats.update(self.reported)
        drafted, accepted = stats.get("drafted"), stats.get("accepted")
        stats["acceptance"] = round(accepted / drafted, 4) if drafted and accepted is not None else None
        if self.skipped:
            stats["skipped_lines"] = self.skipped
        stats["budget_bound"] = self.budget_bound()
        return stats


class OpenAICompatEngine(Engine):
    """A chat server reached over HTTP at ``base_url`` (its /v1 address)."""

    name = "openai"
    # Request fields that steer thinking: the answer request after a cut leaves them out.
    thinking_fields: tuple[str, ...] = ("thinking_budget",)
    # A server whose sessions are the conversation's own: a 409 on the first request is then this engine's previous
    # request, still being released, and is tried again; elsewhere it is another client's and is reported.
    sessions_are_ours = False

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None,
                 stall_s: float = DEFAULT_STALL_S, connect_s: float = 5.0):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.stall_s = stall_s
        headers = {"User-Agent": "specchat"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # The read timeout only ends the reader thread; stalls are judged by EventStream. Every request
        # gets its own connection, so that Stop can shut it down whatever stage the request is at.
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(connect=connect_s, read=stall_s + 5, write=30, pool=connect_s),
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._drafter: str | None = None
        self._unloaded = False
        self.tell_budget = True  # send thinking_budget; off once the server refuses it (mlx-vlm with a drafter)
        self.context: int | None = None  # tokens the served model holds, where the server says
        # Most servers' /models does not say whether a model can see, so images are sent unless it says
        # otherwise: a server that cannot take them refuses the request, and the reply's error gives its words.
        self.vision = True
        self.vision_note: str | None = None  # why it cannot see, and the fix, when vision is False

    @property
    def server(self) -> str:
        return f"The server at {self.base_url}"

    def info(self) -> EngineInfo:
        status = self._status
        return EngineInfo(self.name, self.model or "", self._drafter, status.state, status.message, status.progress,
                          vision=self.vision, vision_note=self.vision_note, tools=True)

    def load(self, options: GenerationOptions) -> None:
        self._set_state("loading", f"connecting to {self.base_url}")
        try:
            self._connect()
        except EngineError:
            pass  # the state says why; the next message tries again

    def _connect(self, cancel: threading.Event | None = None) -> None:
        """Check the server and record the outcome in the state; raises EngineError when it fails."""
        try:
            note = self._check_models(cancel)
        except EngineError as exc:
            self._set_state("error", exc.message)
            raise
        self._set_state("ready", note)

    def _get_json(self, path: str, cancel: threading.Event | None = None):
        url = self.base_url + path
        request = self._client.build_request("GET", url, timeout=httpx.Timeout(MODELS_TIMEOUT_S))
        try:
            response = send_cancellable(self._client, request, cancel)
        except httpx.TimeoutException as exc:
            raise EngineError(f"{self.server} did not answer {url} within {MODELS_TIMEOUT_S:g} s: it may be stuck "
                              "or busy. Check it, then send again.", "stalled") from exc
        except httpx.HTTPError as exc:
            raise connect_error(exc, url) from exc
        if response.status_code != 200:
            raise http_error(response.status_code, error_detail(response), self.server,
                             response.headers.get("Retry-After"))
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise EngineError(f"{self.server} answered {url} with something that is not JSON: it does not look "
                              "OpenAI-compatible. Check --base-url (the server's /v1 address).", "not_openai") from None

    def _check_models(self, cancel: threading.Event | None = None) -> str:
        """Reach GET /models; pick the first model when none was named. Returns a note for the UI."""
        data = self._get_json("/models", cancel)
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise EngineError(f"{self.server} answered /models without a model list: it does not look "
                              "OpenAI-compatible. Check --base-url (the server's /v1 address).", "not_openai")
        ids = [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
        wanted = self.model or (ids[0] if ids else None)
        entry = next((m for m in models if isinstance(m, dict) and m.get("id") == wanted), {})
        self.context = next((v for v in map(entry.get, CONTEXT_KEYS) if isinstance(v, int) and v > 0), None)
        self.vision = says_vision(entry) is not False
        self.vision_note = None if self.vision else (
            f"{self.server} says its model {wanted} cannot see images. Load a model that can (a vision-language "
            "model) there, or remove the images and send again.")
        if self.model is None:
            if not ids:
                raise EngineError(f"{self.server} lists no models. Load one there, or pass --model.", "no_model")
            self.model = ids[0]
        elif ids and self.model not in ids:
            served = ", ".join(ids[:5])
            return as_text(f"{self.model} is not among the served models ({served}); the server may load it.")
        return ""

    def prompt_size(self, messages: list[Message], options: GenerationOptions,
                    continued: bool = False) -> tuple[int, int] | None:
        """An estimate of the prompt (see ``BYTES_PER_TOKEN``) against the context the server reported."""
        if self.context is None:
            return None
        texts = [options.system_prompt, *(m.content for m in messages)]
        size = sum(len(text.encode()) for text in texts) // BYTES_PER_TOKEN + FRAMING_TOKENS * len(texts)
        size += sum(image_tokens(image) for m in messages for image in m.images)
        return size, self.context

    def _check_startable(self, turn: Turn) -> None:
        if not self.can_start():
            status = self._status
            raise EngineNotReady(f"The engine is not ready ({status.state}: {status.message}).")
        if turn.continued:
            raise EngineError(f"The {self.name} engine cannot go on with a reply: regenerate it instead.",
                              code="continue_unsupported")
        if has_images(turn) and not self.vision:
            raise EngineError(self.vision_note or NO_VISION, code="no_vision")

    def can_start(self) -> bool:
        # After a failed load the next message tries again (before_turn), unless the engine was unloaded.
        state = self._status.state
        return state == "ready" or (state == "error" and not self._unloaded)

    def _stream(self, turn: Turn) -> Iterator[Event]:
        return self._reply(turn)

    def payload(self, turn: Turn) -> dict:
        options = turn.options
        thinking = options.reasoning_budget > 0
        messages = [message_body(m) for m in images_after_tools(turn.messages)]
        if options.system_prompt.strip() and not any(m.role == "system" for m in turn.messages):
            messages.insert(0, {"role": "system", "content": options.system_prompt})
        body = {
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": options.temperature,
            "top_p": options.top_p,
            # The server counts thinking (and the token closing it) in max_tokens; the setting counts the answer.
            "max_tokens": options.max_tokens + (options.reasoning_budget + 1 if thinking else 0),
            "enable_thinking": thinking,  # mlx-vlm and MTPLX read it here
            "chat_template_kwargs": {"enable_thinking": thinking},  # mlx-lm, vLLM, SGLang read it here
        }
        if self.model:
            body["model"] = self.model
        if turn.tools:
            body.update(tools=list(turn.tools), tool_choice=turn.tool_choice)
        if thinking and self.tell_budget:
            body["thinking_budget"] = max(0, options.reasoning_budget - SERVER_CLOSE_TOKENS)
        return body

    def answer_payload(self, turn: Turn, reasoning: str) -> dict:
        """The request for the answer after thinking was cut: the reasoning so far, closed, ends the
        conversation as the reply's start; thinking is off, so the server writes the answer."""
        body = self.payload(turn)
        for field in self.thinking_fields:
            body.pop(field, None)
        body["messages"].append({"role": "assistant", "content": f"<think>\n{reasoning.strip()}\n</think>\n\n"})
        body.update(max_tokens=turn.options.max_tokens, enable_thinking=False,
                    chat_template_kwargs={"enable_thinking": False},
                    # vLLM and SGLang continue that message as it is; the others answer after it.
                    continue_final_message=True, add_generation_prompt=False)
        return body

    def headers(self, turn: Turn) -> dict:
        return {}

    def reader(self, turn: Turn) -> ReplyReader:
        return ReplyReader(turn.options, self.server, has_images(turn))

    def before_answer(self, turn: Turn) -> None:
        """Thinking was cut: the server may still be generating the cut request until it notices."""

    def before_turn(self, turn: Turn) -> None:
        """Runs on the reply's thread before the request: a server that was down is checked again."""
        if self._status.state != "ready":
            self._connect(turn.cancel)

    def cancel_remote(self, turn: Turn) -> None:
        """The user pressed Stop; closing the stream already tells a server that honours disconnects."""

    def _reply(self, turn: Turn) -> Iterator[Event]:
        reader = self.reader(turn)
        try:
            self.before_turn(turn)
            body = self.payload(turn)
            reader.told_budget = "thinking_budget" in body
            try:
                bound = yield from self._read(turn, reader, body, retry=self.sessions_are_ours)
            except EngineError as exc:
                if not (reader.told_budget and reader.meter.tokens == 0 and "thinking_budget" in exc.message):
                    raise
                # mlx-vlm refuses a budget when it drafts: thinking is cut here instead, from now on.
                log.info("%s refuses thinking_budget (%s): cutting thinking at the budget instead",
                         self.server, exc.message)
                self.tell_budget = reader.told_budget = False
                bound = yield from self._read(turn, reader, self.payload(turn))
            if bound == "budget" and not turn.cancel.is_set():
                yield from reader.cut_thinking()
                self.before_answer(turn)
                bound = yield from self._read(turn, reader, self.answer_payload(turn, reader.reasoning), retry=True)
        except Cancelled:
            self.cancel_remote(turn)
            yield Done("cancelled", reader.snapshot())
            return
        except EngineError as exc:
            yield from reader.finish_text()
            yield Done("error", reader.snapshot(), exc.code, self.explain(exc))
            return
        yield from reader.finish_text()
        if reader.draft_kind and reader.draft_kind != self._drafter:
            self._drafter = reader.draft_kind
            self._notify()
        if turn.cancel.is_set():
            self.cancel_remote(turn)
            yield Done("cancelled", reader.snapshot())
            return
        # A bound passed (thinking again after its cut, or the answer) ends the reply as the server's limit would;
        # a call cut short by it is not made.
        if bound or reader.finish == "length":
            yield Done("length", reader.snapshot())
            return
        calls = reader.calls.calls()
        yield from calls
        yield Done("tool_calls" if calls else "stop", reader.snapshot())

    def _read(self, turn: Turn, reader: ReplyReader, body: dict, retry: bool = False):
        """Stream one request into ``reader``; returns the bound that cut it ("budget", "answer") or None.

        ``retry``: a 409 (the cut request's session still busy) is tried again for a few seconds.
        """
        for attempt in range(CONFLICT_RETRIES if retry else 1):
            try:
                events = open_event_stream(self._client, self.base_url + "/chat/completions", body,
                                           self.headers(turn), self.server, self.stall_s, turn.cancel,
                                           images=has_images(turn))
                break
            except EngineError as exc:
                if exc.code != "conflict" or attempt == CONFLICT_RETRIES - 1 or not retry:
                    raise
                if turn.cancel.wait(CONFLICT_RETRY_S):
                    raise Cancelled() from None
        chunks, skipped = reader.chunks, reader.skipped
        try:
            for chunk in events.chunks(turn.cancel):
                reader.skipped = skipped + events.skipped
                try:
                    yield from reader.feed(chunk)
                except Bounded as bounded:
                    return bounded.kind
        finally:
            reader.skipped = skipped + events.skipped
            events.close()
        if turn.cancel.is_set() or reader.finish is not None:
            return None
        if reader.chunks == chunks and events.skipped:  # junk, even when it ends with [DONE]
            raise EngineError(f"{self.server} sent no readable chunk ({events.skipped} malformed lines): it does "
                              "not look OpenAI-compatible. Check --base-url.", "not_openai")
        if events.done:
            return None
        raise EngineError(f"{self.server} ended the stream before the reply was finished. It may have stopped; "
                          "send again once it is back.", "connection_lost")

    def explain(self, exc: EngineError) -> str:
        """The message the user sees for ``exc``; the MTPLX engine adds what the supervisor will do."""
        return exc.message

    def reset_cache(self, deep: bool = False) -> dict:
        if self.busy:
            raise EngineBusy("A reply is being generated. Stop it or wait, then reset the cache.")
        return {"prompt_tokens": 0, "entries": 0, "bytes": 0,
                "message": "This server's cache cannot be reset from specchat; restart the server to clear it."}

    def unload(self) -> None:
        self._unloaded = True
        self.cancel_all()
        self._client.close()
        self._set_state("error", "unloaded")
