"""One reply: thinking up to the budget, then the answer, on one cache.

Phase one generates at most ``reasoning_budget`` tokens. If thinking is still
open then, ``</think>`` is appended as tokens and phase two continues from the
conversation's ids, so the cache is reused (no re-tokenised string prompt) and
the budget holds with a drafter too.

The phases run on a decode loop (``OwnLoop``, specchat's compiled draft/verify
loop, or ``VlmLoop``, mlx-vlm's ``stream_generate``); this class owns what
both share: splitting thinking from answer, reading tool calls (``call_token``), batching deltas, the numbers.
A call's markup is never text: each call goes out as a ``ToolCall`` when it ends, a call opened while thinking
ends the thinking there (calls come after it, as the chat template writes them), and a reply that made calls
ends with ``tool_calls``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..base import Turn
from ..batching import DeltaBatch
from ..events import Done, Event, Stats
from ..stats import StatsMeter
from ..thinking import ThinkSplitter
from .conversations import ConversationCache
from .images import TurnImages
from .loading import LoadedModel
from .prompts import PromptBuilder
from .tool_markup import CallReader

TOOL_STATS = ("tool_drafted", "tool_accepted", "tool_acceptance")


class TurnGeneration:
    def __init__(
        self,
        loaded: LoadedModel,
        prompts: PromptBuilder,
        conversation: ConversationCache,
        turn: Turn,
        emit: Callable[[Event], None],
        loop,
        images: TurnImages,
        calls: CallReader | None = None,
    ):
        self.loaded = loaded
        self.prompts = prompts
        self.conversation = conversation
        self.turn = turn
        self.options = turn.options
        self.emit = emit
        self.deltas = DeltaBatch(emit)
        self.loop = loop
        self.images = images  # the images the prompt holds, in order
        self.calls = calls  # reads the model's tool calls when the prompt offers tools
        self.thinking = self.options.reasoning_budget > 0  # this reply starts in its thinking phase
        self.budget = self.options.reasoning_budget
        if turn.continued:  # an unfinished reply goes on where it stopped, its thinking counted
            said = turn.messages[-1]
            self.thinking = self.thinking and not said.content
            self.budget = max(1, self.budget - len(prompts.encode(said.reasoning)))
        self.splitter = ThinkSplitter(thinking=self.thinking)
        self.meter = StatsMeter()
        self.meter.ran_on(loop.name, loop.reason)
        self.meter.image_tokens = images.tokens
        self.speculative = self.options.speculative and loaded.drafter is not None
        self.rounds: list[tuple[int, int]] = []  # (accepted, drafted) per verify round, all phases
        self.tool_rounds: list[tuple[int, int]] = []  # the rounds among them that made tool-call markup
        self._held_rounds: tuple[int, ...] = ()  # rounds whose text the splitter still holds
        self.first_phase = True
        self.budget_bound = "none"  # "cut": thinking was still open at the budget and was closed here
        self.cache_stale = False  # the loop left the conversation's cache unusable for a next turn

    @property
    def cancelled(self) -> bool:
        return self.turn.cancel.is_set()

    def run(self, input_ids: list[int]) -> Done:
        """Generate the reply to ``input_ids``; returns the final ``Done``."""
        self.meter.prompt_tokens = len(input_ids)
        try:
            if not self.thinking:
                finish = self.loop.phase(self, input_ids, self.options.max_tokens)
            else:
                finish = self.loop.phase(self, input_ids, self.budget)
                if finish == "length":
                    finish = self._continue_after_budget()
        finally:
            self.flush()  # text already generated reaches the user even if generation failed
        if self.calls is not None and finish == "stop":
            if self.calls.inside:
                self.emit(self.calls.cut_off())
            if self.calls.made:
                finish = "tool_calls"
        self.read_rounds()
        return Done(finish, {**self.meter.snapshot(), "budget_bound": self.budget_bound, **self._tool_stats()})

    def _tool_stats(self) -> dict:
        """The drafts proposed and kept in rounds that made tool-call markup; null where the loop does not say
        which tokens each round made (mlx-vlm's) or nothing drafts."""
        if self.calls is None or not (self.speculative and self.loop.rounds_by_token):
            return dict.fromkeys(TOOL_STATS)
        drafted = sum(d for _, d in self.tool_rounds)
        accepted = sum(a for a, _ in self.tool_rounds)
        return dict(zip(TOOL_STATS, (drafted, accepted, round(accepted / drafted, 4) if drafted else None)))

    def _continue_after_budget(self) -> str:
        ids = self.conversation.ids
        if self.splitter.thinking:
            self.budget_bound = "cut"
            self.flush()
            self.splitter.thinking = False
            self.meter.end_thinking()
            ids = ids + self.prompts.think_close_ids
        remaining = self.options.max_tokens - self.meter.answer_tokens
        if remaining <= 0:
            return "length"
        return self.loop.phase(self, ids, remaining)

    def deliver(self, text: str, drafted: bool = False, rounds: tuple[int, ...] = ()) -> None:
        """Pass a token's text on as thinking or answer; ``drafted`` marks text from accepted drafts."""
        events = self.splitter.feed(text)
        rounds = self._held_rounds + rounds
        if not events:
            self._held_rounds = rounds
            return
        self._held_rounds = ()
        for i, event in enumerate(events):
            spans = ((0, len(event.text)),) if drafted else ()
            self.deltas.add(type(event)(event.text, rounds if i == len(events) - 1 else (), spans))

    def take_token(self, token: int, detokenizer, drafted: bool = False, rounds: tuple[int, ...] = ()) -> bool:
        """One generated token, as both loops pass it on: tool-call markup is read (its round still counted), any
        other token becomes text. True for markup."""
        if self.call_token(token, detokenizer):
            self.deliver("", rounds=rounds)
            return True
        detokenizer.add_token(token)
        self.deliver(detokenizer.last_segment, drafted, rounds)
        return False

    def call_token(self, token: int, detokenizer) -> bool:
        """Whether ``token`` is tool-call markup, which is read here and never becomes text. The text before a
        call goes out first, as what it is (thinking or answer), and a call ends the thinking."""
        calls = self.calls
        if calls is None or not calls.is_markup(token):
            return False
        if not calls.inside:
            detokenizer.finalize()  # releases what the detokenizer holds back; it takes tokens after, as before
            self.deliver(detokenizer.last_segment)
            if self.splitter.thinking:
                self.flush()
                self.splitter.thinking = False
                self.splitter.after_thinking()
                self.meter.end_thinking()
        made = calls.read(token)
        if made is not None:
            self.flush()  # the text before the call reaches the tab before it
            self.emit(made)
        return True

    @property
    def answer_full(self) -> bool:
        """``max_tokens`` bounds the answer on every path, also when the model closes its own thinking."""
        return not self.splitter.thinking and self.meter.answer_tokens >= self.options.max_tokens

    def counted(self, thinking: bool) -> None:
        """One token generated; live numbers go out about ten times a second."""
        self.meter.token(thinking)
        if self.meter.live_due():
            self.read_rounds()
            self.deltas.flush()
            self.emit(Stats(self.meter.snapshot()))

    def flush(self) -> None:
        for event in self.splitter.flush():
            self.deltas.add(event)
        self.deltas.flush()

    def read_rounds(self) -> None:
        if self.speculative:
            self.meter.record_rounds(self.rounds + self.loop.live_rounds(self))
