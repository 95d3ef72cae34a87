"""A reply's phases on mlx-vlm's own ``stream_generate`` loop (``decode_loop: mlx-vlm``).

Kept for comparison with specchat's loop and for drafters it does not run
(separate DFlash or EAGLE-3 checkpoints).
"""

from __future__ import annotations

import time

from ..block_policy import AUTO
from . import qwen35
from .detokenizer import streaming_detokenizer
from .qwen35 import cached_ids, cached_positions, drafter_rounds, keep_cached_ids


class VlmLoop:
    name = "mlx-vlm"
    rounds_by_token = False  # the drafter's rounds are read after a phase, not per token

    def __init__(self, apc_manager=None, reason: str | None = None):
        self.apc_manager = apc_manager
        self.reason = reason  # why this reply runs here and not on specchat's loop (the stats say it)
        self._live = False  # the drafter's lists hold this phase's rounds (not yet folded in)

    def phase(self, gen, input_ids: list[int], max_tokens: int) -> str:
        import mlx.core as mx
        from mlx_vlm import stream_generate

        options, loaded = gen.options, gen.loaded
        kwargs = {
            "input_ids": mx.array([input_ids]),
            "max_tokens": max_tokens,
            "temperature": options.temperature,
            "top_p": options.top_p,
            "prefill_step_size": options.prefill_step_size or None,
            "prompt_cache_state": gen.conversation.state,
        }
        if self.apc_manager is not None:
            kwargs["apc_manager"] = self.apc_manager
        if gen.images.images:
            kwargs.update(self._image_inputs(gen, input_ids))
        if gen.speculative:
            # "auto" is specchat's own loop's: here the drafter runs at the block its own config names.
            block = None if options.draft_block_size == AUTO else options.draft_block_size
            kwargs.update(draft_model=loaded.drafter, draft_kind=loaded.drafter_kind, draft_block_size=block)

        first_phase = gen.first_phase
        started = time.perf_counter()
        stream = stream_generate(loaded.model, loaded.processor, "", **kwargs)
        # Text comes from our own detokenizer, so a reply cut short here still gets its last token's text.
        detokenizer = streaming_detokenizer(loaded.processor)
        finish = "length"
        try:
            for chunk in stream:
                if gen.cancelled:
                    gen.cache_stale = True
                    return "cancelled"
                self._live = True  # the library reset the drafter's lists before its first token
                if gen.first_phase:
                    gen.first_phase = False
                    gen.meter.cached_tokens = int(chunk.cached_tokens or 0)
                    if first_phase:  # the library's prefill and first token are one step here
                        gen.meter.prefill_ms = round((time.perf_counter() - started) * 1000.0, 1)
                if chunk.finish_reason is not None:
                    # The final chunk repeats the last token. The loop runs on: after it the
                    # library stores the prompt cache.
                    finish = chunk.finish_reason
                    continue
                if gen.answer_full:  # a token past the answer's limit
                    gen.cache_stale = True
                    return "length"
                if not gen.speculative and chunk.generation_tokens > 1:  # a plain step after the phase's first token
                    gen.meter.ran_block(1)
                thinking = gen.splitter.thinking
                if gen.take_token(chunk.token, detokenizer):
                    thinking = False  # a call's tokens are answer tokens: a call ends the thinking
                gen.counted(thinking)
                if gen.answer_full and chunk.generation_tokens < max_tokens:
                    # Cut inside the library's run, whose cache then moves past the stored ids. At its own
                    # limit it ends here too, and stores the cache, which the next turn reuses.
                    gen.cache_stale = True
                    return "length"
            if not self._reconcile_cache(gen.conversation):
                gen.cache_stale = True
            return finish
        finally:
            detokenizer.finalize()
            gen.deliver(detokenizer.last_segment)
            stream.close()
            # The drafter's per-round lists start afresh with the next phase.
            gen.rounds += self.live_rounds(gen)
            self._live = False

    @staticmethod
    def _image_inputs(gen, input_ids: list[int]) -> dict:
        """The prompt's images as ``stream_generate`` takes them: every image's pixels and grid (its prefix
        cache keys entries by the pixels' content, and positions text after an image by the grids), and the
        vision tower's features computed here, timed, unless the conversation's cache holds every image."""
        import mlx.core as mx

        images = gen.images
        started = time.perf_counter()
        pixels, grids = images.processing.inputs(images.images)
        inputs = {"pixel_values": pixels, "image_grid_thw": grids}
        held = cached_ids(gen.conversation.state)
        if held == input_ids[: len(held)] and images.held(held) == len(images.images):
            return inputs
        features = qwen35.vision(gen.loaded.model).encode(pixels, grids)
        mx.eval(features)
        gen.meter.vision_ms = round((time.perf_counter() - started) * 1000.0, 1)
        return inputs | {"cached_image_features": features}

    def live_rounds(self, gen) -> list[tuple[int, int]]:
        if not (gen.speculative and self._live):
            return []
        return drafter_rounds(gen.loaded.drafter)

    @staticmethod
    def _reconcile_cache(conversation) -> bool:
        """Make the stored ids match what the cache holds; False when that cannot be told (drop it then).

        After a speculative run mlx-vlm 0.7 stores the last sampled token though
        the cache has not processed it yet; reusing that would skip the token.
        What the cache has processed is read, not assumed: ids it lacks are cut
        from the library's ids (the conversation keeps them all), so the next
        prompt feeds them; ids that agree are left alone.
        """
        state = conversation.state
        conversation.ids = cached_ids(state)
        cached = cached_positions(state)
        if cached is None or cached > len(conversation.ids):
            return False
        if cached < len(conversation.ids):
            keep_cached_ids(state, cached)
        return True
