"""``qwen3_5_moe`` on specchat's own loop: a tiny MoE checkpoint with its MTP head, and its 4-bit conversion
with the head beside it, load, decode, say which loop ran and are greedy-identical at every block, with mlx-vlm's
switch layers (quantized in the conversion) doing the experts."""

import pytest

from engines import Done, GenerationOptions, Message, Turn, guarded
from engines.mlx.decoding import Decoder, Sampling
from engines.mlx.loading import load_drafter, load_model

pytestmark = pytest.mark.slow

BLOCKS = (2, 3, 4, 5, 6)
# The second is long enough (with the template, over 32 tokens, two experts each) that the switch layers
# sort the tokens by expert while prefilling.
PROMPTS = ("What is 347 + 589?", "the cache keeps the prompt so the next turn starts fast . " * 4)


@pytest.fixture(scope="module")
def moe_model(tmp_path_factory):
    from demo_model.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3_5_moe", moe=True)


@pytest.fixture(scope="module")
def moe(moe_model):
    loaded = load_model(str(moe_model))
    load_drafter(loaded, None)
    return loaded


def _prompt(loaded, text):
    from engines.mlx.prompts import PromptBuilder

    return PromptBuilder(loaded).conversation_ids("You are a helpful assistant.", [Message("user", text)], False)


def _generate(decoder, ids, block, max_tokens=48):
    state = decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    tokens, rounds = [], []
    for step in decoder.decode(state, first, max_tokens=max_tokens, block=block, sampling=Sampling(),
                               stop_ids=set(), cancelled=lambda: False):
        tokens += step.tokens
        if step.accepted is not None:
            rounds.append(step.accepted)
    return tokens, rounds, state


def test_the_moe_checkpoint_loads_with_a_sparse_body_and_head(moe):
    from mlx_vlm.models.qwen3_5_moe.language import Qwen3_5MoeSparseMoeBlock

    assert moe.model.config.model_type == "qwen3_5_moe" and moe.drafter_kind == "mtp"
    assert all(isinstance(layer.mlp, Qwen3_5MoeSparseMoeBlock) for layer in moe.model.language_model.model.layers)
    assert isinstance(moe.drafter.layers[0].mlp, Qwen3_5MoeSparseMoeBlock)


@pytest.mark.parametrize("text", PROMPTS, ids=["short", "long"])
def test_greedy_output_is_mlx_vlms_at_every_block(moe, text):
    import mlx.core as mx
    from mlx_vlm import stream_generate

    ids = _prompt(moe, text)
    theirs = [c.token for c in stream_generate(moe.model, moe.processor, "", input_ids=mx.array([ids]),
                                               max_tokens=48, temperature=0.0) if c.finish_reason is None]
    decoder = Decoder(moe.model, moe.drafter)
    plain, rounds, _ = _generate(decoder, ids, 1)
    assert plain == theirs and rounds == []
    for block in BLOCKS:
        tokens, rounds, state = _generate(decoder, ids, block)
        assert tokens == plain, f"block {block} diverged"
        assert rounds and max(rounds) <= block - 1
        # Rolled back to exactly what it holds: a next turn fed on it continues as a fresh prefill does.
        assert state.ids == ids + tokens[:-1] and state.target.offset == len(state.ids)
        more = state.ids + [tokens[-1]] + _prompt(moe, "one two three")[-6:]
        fresh, _, _ = _generate(decoder, more, 1, max_tokens=8)
        first = decoder.feed(state, more, 0, Sampling())
        went_on = [t for step in decoder.decode(state, first, max_tokens=8, block=block, sampling=Sampling(),
                                                stop_ids=set(), cancelled=lambda: False) for t in step.tokens]
        assert went_on == fresh, f"block {block}: the next turn on the kept state differs"


def _engine_reply(model, **options) -> Done:
    """The Done of one greedy drafted reply through the MLX engine on ``model``, loaded for it and unloaded after."""
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(model))
    engine.load(GenerationOptions())
    try:
        options = GenerationOptions(reasoning_budget=0, max_tokens=24, temperature=0.0, draft_block_size=3,
                                    **options)
        turn = Turn(id="t", conversation_id="moe", messages=[Message("user", "What is 347 + 589?")], options=options)
        return next(e for e in guarded(engine.stream(turn)) if isinstance(e, Done))
    finally:
        engine.unload()


@pytest.mark.parametrize("loop", ["specchat", "mlx-vlm"])
def test_the_engine_runs_moe_on_the_asked_loop_and_says_so(moe_model, loop):
    done = _engine_reply(moe_model, decode_loop=loop)
    assert done.finish_reason in ("stop", "length") and done.stats["rounds"] > 0
    assert done.stats["decode_loop"] == loop
    assert done.stats["decode_loop_reason"] == (None if loop == "specchat" else "the settings ask for mlx-vlm's loop")


@pytest.fixture(scope="module")
def moe_4bit(moe_model):
    """The MoE checkpoint as users' are made: ``mlx_vlm.convert -q --q-bits 4 --mtp``, its head written beside it."""
    from demo_model.hf_layout import convert

    return convert(moe_model, moe_model.parent / "tiny-qwen3_5_moe-4bit", bits=4, group_size=64, mtp=True)


def test_a_4_bit_moe_conversion_finds_its_head_runs_the_own_loop_and_is_greedy_identical(moe_4bit, tmp_path):
    from mlx_vlm.models.switch_layers import QuantizedSwitchLinear

    from engines.mlx.drafter_search import DrafterSearch

    loaded = load_model(str(moe_4bit))
    load_drafter(loaded, None, DrafterSearch(data_dir=tmp_path / "data"))  # found beside it, nothing built
    assert loaded.drafter_name == f"{moe_4bit}-mtp (mtp)" and not (tmp_path / "data").exists()
    assert all(isinstance(layer.mlp.switch_mlp.gate_proj, QuantizedSwitchLinear)
               for layer in loaded.model.language_model.model.layers)
    decoder = Decoder(loaded.model, loaded.drafter)
    for text in PROMPTS:
        ids = _prompt(loaded, text)
        plain, _, _ = _generate(decoder, ids, 1)
        for block in BLOCKS:
            tokens, rounds, _ = _generate(decoder, ids, block)
            assert tokens == plain, f"{text[:20]!r} at block {block}"
            assert rounds

    done = _engine_reply(moe_4bit)
    assert done.stats["rounds"] > 0 and done.stats["decode_loop"] == "specchat"
    assert done.stats["decode_loop_reason"] is None
