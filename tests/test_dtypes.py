"""The own loop computes in the checkpoint's own activation dtype: float16 checkpoints, quantized or not,
decode as mlx-vlm's own plain generation does, token for token."""

import pytest

from engines import Message
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
