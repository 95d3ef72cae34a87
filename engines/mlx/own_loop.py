"""A reply's phases on specchat's own compiled decode loop (``decode_loop: specchat``).

The conversation keeps its ``DecodeState`` between turns and phases, so a next
turn or the answer after a budget cut feeds only its new tokens. A new
conversation starts from the system prompt's snapshot when it matches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .decoding import Decoder, DecodeState
from .detokenizer import streaming_detokenizer
from .images import TurnImages
from .sampling import Sampling


@dataclass
class PrefixSnapshot:
    """The state after a prompt prefix (the system prompt), shared by new conversations."""

    ids: list[int]
    state: DecodeState

    def start(self, ids: list[int], images: TurnImages) -> DecodeState | None:
        if len(ids) > len(self.ids) and ids[: len(self.ids)] == self.ids and images.fits(self.ids, self.state.images):
            return self.state.snapshot()
        return None


class OwnLoop:
    name = "specchat"
    reason = None  # the default loop needs no reason
    rounds_by_token = True  # each round's tokens are known (which rounds made tool-call markup)

    def __init__(self, decoder: Decoder, stop_ids: set[int], prefix: PrefixSnapshot | None = None, policy=None):
        """``policy``: the reply's ``BlockPolicy`` when its block is "auto" (its phases share it)."""
        self.decoder = decoder
        self.stop_ids = stop_ids
        self.prefix = prefix
        self.policy = policy

    def phase(self, gen, input_ids: list[int], max_tokens: int) -> str:
        import mlx.core as mx

        options, conversation, images = gen.options, gen.conversation, gen.images
        state = self._state_for(conversation.decode, input_ids, images)
        first_phase, gen.first_phase = gen.first_phase, False
        if first_phase:
            gen.meter.cached_tokens = len(state.ids)
        sampling = Sampling(options.temperature, options.top_p)
        conversation.decode = None  # until the feed completes, the cache matches no ids
        feed = self._image_feed(gen, state, input_ids)
        started = time.perf_counter()
        first = self.decoder.feed(state, input_ids, options.prefill_step_size, sampling,
                                  cancelled=lambda: gen.cancelled, images=feed)
        if first is None:
            gen.cache_stale = True  # the conversation's ids now lack this turn
            return "cancelled"
        mx.eval(first)
        if first_phase:
            gen.meter.prefill_ms = round((time.perf_counter() - started) * 1000.0, 1)
        state.images = images.shas
        conversation.decode = state
        detokenizer = streaming_detokenizer(gen.loaded.processor)
        generated: list[int] = []
        ended = None
        block = (self.policy or options.draft_block_size) if gen.speculative else 1
        try:
            steps = self.decoder.decode(
                state, first, max_tokens=max_tokens, block=block,
                sampling=sampling, stop_ids=self.stop_ids, cancelled=lambda: gen.cancelled,
            )
            for step in steps:
                ended = self._deliver(gen, step, detokenizer, generated)
                if ended:
                    break
        finally:
            detokenizer.finalize()
            gen.deliver(detokenizer.last_segment)
            conversation.ids = input_ids + generated
        return ended or ("cancelled" if gen.cancelled else "length")

    def _deliver(self, gen, step, detokenizer, generated: list[int]) -> str | None:
        """Pass one step's tokens on; "stop" at a stop token, "length" when the answer is full."""
        if step.accepted is not None:
            gen.rounds.append((step.accepted, step.proposed))
        if step.block is not None:
            gen.meter.ran_block(step.block, auto=self.policy is not None and gen.speculative)
        round_info = () if step.accepted is None else (step.accepted,)
        ended, markup = None, False
        for i, (token, drafted) in enumerate(zip(step.tokens, step.drafted)):
            generated.append(token)
            if token in self.stop_ids:
                gen.deliver("", rounds=round_info)
                ended = "stop"
                break
            thinking = gen.splitter.thinking
            last = round_info if i == len(step.tokens) - 1 else ()
            if gen.take_token(token, detokenizer, drafted, last):
                markup, thinking = True, False  # a call's tokens are answer tokens: a call ends the thinking
            gen.counted(thinking)
            if gen.answer_full:
                if i < len(step.tokens) - 1:  # the cache holds tokens past the cut: start afresh next turn
                    gen.conversation.decode = None
                ended = "length"
                break
        if markup and step.accepted is not None:
            gen.tool_rounds.append((step.accepted, step.proposed))
        return ended

    def live_rounds(self, gen) -> list[tuple[int, int]]:
        return []  # each round is added to ``gen.rounds`` as it ends

    def _image_feed(self, gen, state: DecodeState, ids: list[int]):
        """The vision tower's features for the images past ``state`` and the M-RoPE positions they are fed at;
        None when the new ids hold no image (its time, the processor's and the tower's, is ``vision_ms``)."""
        import mlx.core as mx

        images = gen.images
        new = images.after(state.ids)
        if not new:
            return None
        started = time.perf_counter()
        pixels, grids = images.processing.inputs(new)
        features = self.decoder.vision.encode(pixels, grids)
        mx.eval(features)
        gen.meter.vision_ms = round((time.perf_counter() - started) * 1000.0, 1)
        return self.decoder.image_feed(ids, len(state.ids), features, images.processing.grids(images.images))

    def _state_for(self, state: DecodeState | None, ids: list[int], images: TurnImages) -> DecodeState:
        """The conversation's state if ``ids`` extend it with the same images, else the prefix snapshot's,
        else a new one. Ids alone do not tell images of one size apart: their content does."""
        if (state is not None and len(ids) > len(state.ids) and ids[: len(state.ids)] == state.ids
                and images.fits(state.ids, state.images)):
            return state
        started = self.prefix.start(ids, images) if self.prefix is not None else None
        return started or self.decoder.new_state()
