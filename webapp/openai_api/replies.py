"""A reply's events in OpenAI's shapes: streamed chunks or one completion, with ``usage`` and llama.cpp's
``timings`` (plus what the drafter did at each depth)."""

from __future__ import annotations

import time
import uuid

from engines.tool_calls import openai_tool_calls

from .requests import ChatRequest

FINISH = {"stop": "stop", "length": "length", "cancelled": "stop", "tool_calls": "tool_calls"}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage(stats: dict) -> dict:
    prompt, cached = stats.get("prompt_tokens") or 0, stats.get("cached_tokens") or 0
    completion = stats.get("tokens") or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": stats.get("thinking_tokens") or 0},
            "prompt_tokens_details": {"cached_tokens": cached}}


def timings(stats: dict) -> dict:
    """llama.cpp's names: the prompt's uncached tokens and the time to the first token; the generated tokens after
    it and their time and rate; the drafted and accepted tokens, with acceptance by draft depth and the verify
    rounds (specchat's own, beside llama.cpp's names)."""
    prompt, cached = stats.get("prompt_tokens") or 0, stats.get("cached_tokens") or 0
    tokens, rate = stats.get("tokens") or 0, stats.get("tok_s")
    return {
        "prompt_n": max(prompt - cached, 0), "prompt_ms": stats.get("ttft_ms"),
        "predicted_n": tokens,
        "predicted_ms": round((tokens - 1) / rate * 1000.0, 1) if rate else None,
        "predicted_per_second": rate,
        "draft_n": stats.get("drafted") or 0, "draft_n_accepted": stats.get("accepted") or 0,
        "acceptance_by_depth": stats.get("acceptance_by_depth"), "rounds": stats.get("rounds"),
    }


class StopCut:
    """Cuts the answer at the first of the request's stop strings. Text that could be the start of one is held
    back until the next delta tells, so no part of a stop string is ever sent."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self._held = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """The part of ``text`` safe to send now; after a hit, nothing more."""
        if not self.stops or self.hit:
            return "" if self.hit else text
        text = self._held + text
        at = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
        if at >= 0:
            self.hit, self._held = True, ""
            return text[:at]
        keep = max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def rest(self) -> str:
        """What was held back when the reply ended without a stop string."""
        held, self._held = self._held, ""
        return held


class Chunks:
    """The streamed ``chat.completion.chunk`` objects of one reply."""

    def __init__(self, request: ChatRequest, model: str):
        self.id, self.created, self.model = completion_id(), int(time.time()), model
        self.request = request

    def _chunk(self, delta: dict, finish: str | None = None) -> dict:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    def role(self) -> dict:
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, thinking: bool, text: str) -> dict:
        return self._chunk({"reasoning_content": text} if thinking else {"content": text})

    def tool_call(self, index: int, call) -> dict:
        """One of the reply's calls, whole in one piece, with its ``index`` among them as OpenAI's stream has it."""
        return self._chunk({"tool_calls": [{"index": index, **openai_tool_calls([call])[0]}]})

    def progress(self, stats: dict) -> dict:
        """The numbers so far, live (at most ten a second): an empty delta with ``timings``, as llama.cpp sends them
        with ``timings_per_token``, so that a client can show what the drafter does while the reply streams."""
        return {**self._chunk({}), "timings": timings(stats)}

    def finish(self, finish_reason: str) -> dict:
        return self._chunk({}, FINISH.get(finish_reason, finish_reason))

    def usage(self, stats: dict) -> dict:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [], "usage": usage(stats), "timings": timings(stats)}


def completion(model: str, answer: str, thinking: str, finish_reason: str, stats: dict, calls=()) -> dict:
    """The whole ``chat.completion`` of a reply not streamed; with ``calls``, its content may be null."""
    message = {"role": "assistant", "content": answer or (None if calls else "")}
    if thinking:
        message["reasoning_content"] = thinking
    if calls:
        message["tool_calls"] = openai_tool_calls(calls)
    return {"id": completion_id(), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": FINISH.get(finish_reason, finish_reason)}],
            "usage": usage(stats), "timings": timings(stats)}
