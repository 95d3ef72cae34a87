"""A scripted engine with the real engine's contract, shared by unit, websocket and browser tests.

It thinks for up to ``reasoning_budget`` words, answers with a fixed Markdown
text (``answer``, which a test may lengthen), honours cancel between forward passes, refuses a second concurrent
stream, can be told to fail mid-stream, and pauses where a test asks (``holds``,
until ``resume()``) so a live state lasts while the test looks at it. Each
forward pass (one plain token, or one verify round with the drafter on) takes
``delay_s``; verify rounds keep drafts by a fixed pattern, so drafting is
faster by the tokens a round yields, unless ``round_s`` makes each round cost
more than that saves; at block "auto" the real policy (block_policy.py) picks each pass's block, pricing
passes at what they sleep. A word is a token; given a context
(``context_words``) it measures prompts and refuses one that does not fit.
It can see (``vision``): a reply to a message with images opens by saying how
many it got and their sizes, and each image counts ``IMAGE_WORDS`` tokens.
It calls tools as scripted (``tool_calls``): after its thinking, a reply whose turn offers tools makes the
scripted calls of the tools offered and ends with ``tool_calls``; a reply after tool results answers by
quoting them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from .base import Engine, EngineInfo, Message, Turn
from .errors import EngineError
from .events import Answer, Done, Event, Stats, Thinking, ToolCall
from .block_policy import AUTO, BLOCKS, Memory, StepCosts
from .options import GenerationOptions
from .stats import StatsMeter

THINKING = "Let me think about this step by step . The user wants a reply . "
ANSWER = "Here is **an answer** with code:\n\n```python\nprint('hello')\n```\n\nDone."
KEPT = (3, 3, 1, 3, 0, 2, 3, 1)  # drafts kept in successive verify rounds (at most the block's drafts)
IMAGE_WORDS = 16  # the tokens one image takes in the prompt


class FakeEngine(Engine):
    name = "fake"

    def __init__(self, delay_s: float = 0.005, load_s: float = 0.0, fail_after: int | None = None):
        super().__init__()
        self.delay_s = delay_s
        self.load_s = load_s
        self.fail_after = fail_after  # raise after this many tokens, to test failures
        self.holds: list[int] = []  # pause a stream on reaching each of these token counts, until resume()
        self._resume = threading.Semaphore(0)
        self._seen: dict[str, int] = {}
        self.turns: list[Turn] = []
        self.context_words: int | None = None  # a context this many words long (a word is a token); None: unbounded
        self.round_s = 0.0  # what a verify round costs on top of ``delay_s``: a drafter that does not pay
        self.auto = Memory()  # draft_block_size "auto": what it learned, per conversation
        self.answer: str | None = None  # the text every reply answers with, after its thinking (None: ANSWER)
        self.vision = True  # takes images; a test sets False for a model that cannot see
        self.tool_calls: list[tuple[str, dict]] = []  # (tool, arguments) a reply offered those tools calls
        self.calls_tools = True  # takes tools; a test sets False for an engine that cannot

    def info(self) -> EngineInfo:
        status = self._status
        return EngineInfo(self.name, "fake-model", "fake drafter", status.state, status.message, vision=self.vision,
                          vision_note=None if self.vision else "The fake model is set up blind: it cannot see "
                          "images. Remove the images, or switch to a model that can see.", tools=self.calls_tools)

    def load(self, options: GenerationOptions) -> None:
        self._set_state("loading", "loading the fake model")
        time.sleep(self.load_s)
        self._set_state("ready")

    def _stream(self, turn: Turn) -> Iterator[Event]:
        self.turns.append(turn)
        return self._run(turn)

    def _run(self, turn: Turn) -> Iterator[Event]:
        opts, meter = turn.options, StatsMeter()
        meter.prompt_tokens = _words(turn.messages)
        meter.cached_tokens = self._seen.get(turn.conversation_id, 0)
        if self.context_words is not None and meter.prompt_tokens >= self.context_words:
            yield Done("error", meter.snapshot(), "context_length",
                       f"The conversation is {meter.prompt_tokens} tokens; this model holds at most "
                       f"{self.context_words}. Start a new chat, or send a shorter message.")
            return
        policy = None
        if opts.speculative and opts.draft_block_size == AUTO:
            # Auto prices rounds by what the fake's passes cost (read per reply: a test may change them).
            pass_s = self.delay_s + self.round_s
            self.auto.times.given = StepCosts(self.delay_s, 0.0, {2: pass_s, BLOCKS[-1]: pass_s})
            policy = self.auto.policy(turn.conversation_id)
        rounds: list[tuple[int, int]] | None = [] if opts.speculative else None
        if rounds is not None:
            meter.record_rounds(rounds)
        thinking_words = [(True, w + " ") for w in THINKING.split()][: opts.reasoning_budget]
        answer = ANSWER if self.answer is None else self.answer  # read per reply: a test may replace ANSWER
        images = next((m.images for m in reversed(turn.messages) if m.role == "user"), ())
        if images:
            answer = describe_images(images) + "\n\n" + answer
        results = _tool_results(turn.messages)
        if results:
            answer = results + "\n\n" + answer
        calls = self._calls(turn) if not results else []
        if calls:
            answer = ""
        meter.image_tokens = IMAGE_WORDS * sum(len(m.images) for m in turn.messages)
        answer_words = [(False, w + " ") for w in answer.split(" ")] if answer else []
        if turn.continued:  # go on after the words the unfinished reply already has
            said = turn.messages[-1]
            thinking_words = thinking_words[_words_in(thinking_words, said.reasoning):]
            answer_words = answer_words[_words_in(answer_words, said.content):]
        script = thinking_words + answer_words[: opts.max_tokens]
        finish = "stop" if len(answer_words) <= opts.max_tokens else "length"
        n = 0
        while n < len(script):
            if turn.cancel.is_set():
                finish = "cancelled"
                break
            if self.holds and n >= self.holds[0]:
                # Paused: the numbers so far go out live, then nothing more until resume() or a cancel.
                del self.holds[0]
                if n:
                    yield Stats(meter.snapshot())
                while not (self._resume.acquire(timeout=0.02) or turn.cancel.is_set()):
                    pass
                continue
            block = policy.block() if policy else opts.draft_block_size if opts.speculative else 1
            drafts = block - 1
            time.sleep(self.delay_s + (self.round_s if drafts else 0.0))
            # One forward pass: a plain token, or a verify round's kept drafts plus the verifier's token.
            kept = min(KEPT[len(rounds) % len(KEPT)], drafts, len(script) - n - 1) if drafts else 0
            if drafts:
                rounds.append((kept, drafts))
                meter.record_rounds(rounds)
            meter.ran_block(block, auto=policy is not None)
            if policy:
                policy.observe(block, kept if drafts else None)
            for i, (thinking, text) in enumerate(script[n: n + kept + 1]):
                if self.fail_after is not None and n >= self.fail_after:
                    raise EngineError("The fake engine failed on purpose.", code="generation_failed")
                meter.token(thinking)
                n += 1
                delta = Thinking if thinking else Answer
                yield delta(text, rounds=(kept,) if drafts and i == kept else (),
                            draft_spans=((0, len(text)),) if i < kept else ())
            if meter.live_due():
                yield Stats(meter.snapshot())
        self._seen[turn.conversation_id] = meter.prompt_tokens + meter.tokens
        if calls and finish == "stop":
            yield from calls
            finish = "tool_calls"
        yield Done(finish, meter.snapshot())

    def _calls(self, turn: Turn) -> list[ToolCall]:
        offered = {tool.get("function", {}).get("name") for tool in turn.tools}
        if turn.tool_choice == "none":
            return []
        return [ToolCall(f"call_{n}", name, dict(arguments))
                for n, (name, arguments) in enumerate(self.tool_calls) if name in offered]

    def prompt_size(self, messages: list[Message], options: GenerationOptions,
                    continued: bool = False) -> tuple[int, int] | None:
        if self.context_words is None:
            return None
        return _words(messages), self.context_words

    def resume(self) -> None:
        """Let a stream paused at one of ``holds`` go on."""
        self._resume.release()

    def reset_cache(self, deep: bool = False) -> dict:
        freed = {"prompt_tokens": sum(self._seen.values()), "entries": len(self._seen), "bytes": 0}
        self._seen.clear()
        return freed

    def forget(self, conversation_id: str) -> None:
        self._seen.pop(conversation_id, None)
        self.auto.forget(conversation_id)

    def unload(self) -> None:
        self._set_state("error", "unloaded")


def describe_images(images) -> str:
    """What the fake model says it got: "I got 2 images: 64×48 PNG, 10×10 JPEG." """
    sizes = ", ".join(f"{i.width}×{i.height} {i.mime.split('/')[-1].upper()}" for i in images)
    return f"I got {len(images)} image{'s' if len(images) != 1 else ''}: {sizes}."


def _tool_results(messages: list[Message]) -> str:
    """The results the reply answers from: the tool messages after the last user message, quoted."""
    results = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.insert(0, f"The tool said: {message.content}")
    return " ".join(results)


def _words(messages: list[Message]) -> int:
    return sum(len(m.content.split()) + IMAGE_WORDS * len(m.images) for m in messages)


def _words_in(script: list[tuple[bool, str]], text: str) -> int:
    """How many of the script's words ``text`` already holds."""
    held = 0
    for count, (_, word) in enumerate(script):
        if held + len(word) > len(text):
            return count
        held += len(word)
    return len(script)
