"""The own loop computes in the checkpoint's own activation dtype: float16 checkpoints, quantized or not,
compute what mlx-vlm's own plain generation does, to float16's rounding. The tiny random-weight conversions
decode as it does token for token; a trained model's logits may be a few roundings apart, so its greedy text
parts from mlx-vlm's only at near-ties."""

import pytest

from engines import GenerationOptions, Message
from engines.mlx.decoding import Decoder, Sampling
from engines.mlx.loading import load_model

pytestmark = pytest.mark.slow

PROMPTS = ("What is 347 + 589?", "hello how are you today ?", "the cache keeps the prompt", "one two three")


@pytest.fixture(scope="module", params=[None, 4, 8], ids=["float16", "4-bit", "8-bit"])
def converted(request, float16_base, tmp_path_factory):
    """The float16 base through ``mlx_vlm.convert``: kept float, or quantized (float16 scales)."""
    from demo_model.hf_layout import convert

    out = tmp_path_factory.mktemp("mlx") / f"tiny-f16-{request.param or 'float'}"
    return load_model(str(convert(float16_base, out, bits=request.param, group_size=32)))


def _prompt(loaded, text):
    from engines.mlx.prompts import PromptBuilder

    return PromptBuilder(loaded).conversation_ids("You are a helpful assistant.", [Message("user", text)], False)


def _theirs(loaded, ids, max_tokens):
    import mlx.core as mx
    from mlx_vlm import stream_generate

    return [c.token for c in stream_generate(loaded.model, loaded.processor, "", input_ids=mx.array([ids]),
                                             max_tokens=max_tokens, temperature=0.0) if c.finish_reason is None]


def _ours(decoder, ids, max_tokens):
    state = decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    return [t for step in decoder.decode(state, first, max_tokens=max_tokens, block=1, sampling=Sampling(),
                                         stop_ids=set(), cancelled=lambda: False) for t in step.tokens]


def test_caches_take_the_checkpoints_activation_dtype(converted):
    import mlx.core as mx

    decoder = Decoder(converted.model)
    assert decoder.target.dtype == mx.float16
    keys, _ = next(layer for layer in decoder.new_state().target.layers if layer[0].ndim == 4)
    assert keys.dtype == mx.float16


def test_float16_drafter_off_is_mlx_vlms_plain_generation(converted):
    decoder = Decoder(converted.model)
    for text in PROMPTS:
        ids = _prompt(converted, text)
        theirs = _theirs(converted, ids, 24)
        assert len(theirs) == 24
        assert _ours(decoder, ids, 24) == theirs, text


# A trained model's float16 logits: each loop rounds a step its own way (operations in another order, fused or
# not), so the two sets of logits are a few float16 roundings apart (up to 0.09 on the demo model at logits
# near 23, where one rounding is 0.016), and where two tokens are nearer than that the loops may choose
# differently. Neither is wrong: ``NEAR_TIE`` is the most two such sets of logits can move a choice.
LOGITS_APART = 0.125
NEAR_TIE = 2 * LOGITS_APART
GREEDY = GenerationOptions(reasoning_budget=0, max_tokens=16, temperature=0.0, speculative=False)
ANSWERS = ("I have 2.5 km. How many meters is that?", "Which one is larger, 812 or 798?",
           "What day of the week is it 10 days after Friday?")


@pytest.fixture(scope="module")
def demo_float16(tmp_path_factory):
    """The shipped demo model as a float16 checkpoint in Hugging Face layout, its config declaring float16,
    with one unused token made a twin of " is" (its tied row × (1 + 1e-3)): wherever " is" wins the two are
    a rounding apart. Converted by ``mlx_vlm.convert`` to 4 bits (float16 scales)."""
    import json
    import shutil

    import mlx.core as mx
    from tokenizers import Tokenizer

    from demo_model import DEFAULT_MODEL
    from demo_model.hf_layout import convert, hf_config, hf_weights

    hf = tmp_path_factory.mktemp("demo-f16") / "demo-f16-hf"
    hf.mkdir()
    weights = {k: v.astype(mx.float32) for k, v in mx.load(str(DEFAULT_MODEL / "model.safetensors")).items()}
    tensors = {k: v.astype(mx.float16) for k, v in hf_weights(weights, vision=False).items()}
    embed = tensors["model.language_model.embed_tokens.weight"]
    (word,) = Tokenizer.from_file(str(DEFAULT_MODEL / "tokenizer.json")).encode(" is").ids
    twin = embed.shape[0] - 1  # the last id, a word none of ANSWERS' replies needs
    row = (embed[word].astype(mx.float32) * (1 + 1e-3)).astype(mx.float16)
    tensors["model.language_model.embed_tokens.weight"] = mx.concatenate([embed[:twin], row[None]])
    mx.save_safetensors(str(hf / "model.safetensors"), tensors, metadata={"format": "pt"})
    config = json.loads((DEFAULT_MODEL / "config.json").read_text())
    (hf / "config.json").write_text(json.dumps(hf_config(config, "float16")))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        shutil.copy(DEFAULT_MODEL / name, hf / name)
    return convert(hf, hf.with_name("demo-f16-4bit"), bits=4, group_size=64)


def test_float16_loops_compute_the_same_logits_to_a_few_roundings(demo_float16):
    """Both loops on the same tokens (mlx-vlm's choices): every step's logits within LOGITS_APART, so a
    different computation (a rotation, a scale, a mask, a dtype) would show here even where the text agrees."""
    import mlx.core as mx
    from mlx_vlm import stream_generate

    loaded = load_model(str(demo_float16))
    target = Decoder(loaded.model).target
    for text in ANSWERS:
        ids = _prompt(loaded, text)
        theirs = []
        tokens = [c.token for c in stream_generate(loaded.model, loaded.processor, "", input_ids=mx.array([ids]),
                                                   max_tokens=12, temperature=0.0,
                                                   logits_processors=[lambda _, x: theirs.append(x) or x])
                  if c.finish_reason is None]
        caches = target.new_caches()
        ours = [target.head(target.prefill(caches, ids, 0)[:, -1:])]
        for token in tokens[:-1]:
            step = target.verify(caches, mx.array([[token]], dtype=mx.int32), greedy=False)
            target.commit(caches, step, 1)
            ours.append(step.logits)
        assert len(ours) == len(tokens) > 4 and len(theirs) > len(tokens)  # mlx-vlm computes a step ahead
        apart = max(float(mx.abs(a.astype(mx.float32).reshape(-1) - b.astype(mx.float32).reshape(-1)).max())
                    for a, b in zip(ours, theirs))
        assert apart <= LOGITS_APART, text


def test_float16_greedy_replies_part_from_mlx_vlms_only_at_near_ties(demo_float16):
    """The engine's replies on its own loop and on mlx-vlm's: the same text, or where they part the target's
    top two logits (``divergence_margin``, as a race reports it) are under NEAR_TIE apart."""
    from engines import Answer, Done, Turn, guarded
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(demo_float16), drafter="none")
    engine.load(GenerationOptions())
    try:
        for n, text in enumerate(ANSWERS):
            replies = []
            for loop in ("specchat", "mlx-vlm"):
                options = GREEDY.updated({"decode_loop": loop})
                turn = Turn(id=f"{n}-{loop}", conversation_id=f"{n}-{loop}", messages=[Message("user", text)],
                            options=options)
                events = list(guarded(engine.stream(turn)))
                assert isinstance(events[-1], Done) and events[-1].stats["decode_loop"] == loop
                replies.append(Message("assistant", "".join(e.text for e in events if isinstance(e, Answer))))
            if replies[0] != replies[1]:
                margin = engine.divergence_margin([Message("user", text)], GREEDY, *replies)
                assert margin is not None and margin < NEAR_TIE, (text, replies, margin)
    finally:
        engine.unload()
