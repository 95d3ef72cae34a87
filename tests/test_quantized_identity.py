"""Checkpoints built as users' are (``mlx_vlm.convert -q --mtp`` of a Hugging Face float checkpoint: 4-, 5-, 6-,
8-bit and mixed, bfloat16 and float16 bases, with and without the vision tower) decode on specchat's own loop with
their MTP head, and greedy output with the drafter is drafter-off output, token for token, at blocks 2-6."""

import pytest

from engines import Message
from engines.mlx.decoding import Decoder, Sampling
from engines.mlx.loading import load_drafter, load_model
from tests.support.quantized import product_magnitude

pytestmark = pytest.mark.slow

BLOCKS = (2, 3, 4, 5, 6)
PROMPTS = ("What is 347 + 589?", "the cache keeps the prompt so the next turn starts fast .")
CONVERSIONS = {  # name: (base, bits, group size, mixed predicate)
    "4-bit g64": ("bfloat16", 4, 64, None),
    "5-bit g32": ("bfloat16", 5, 32, None),
    "6-bit g64": ("bfloat16", 6, 64, None),
    "8-bit g64": ("bfloat16", 8, 64, None),
    "mixed 3/6": ("bfloat16", 4, 64, "mixed_3_6"),
    "float16 5-bit": ("float16", 5, 64, None),
    "text-only 4-bit g64": ("bfloat16 without its vision tower", 4, 64, None),
}


@pytest.fixture(scope="module", params=list(CONVERSIONS))
def conversion(request, hf_base, float16_base, tmp_path_factory):
    """A conversion with --mtp, loaded with the head it wrote beside it."""
    from demo_model.hf_layout import build_hf_checkpoint, convert

    base, bits, group, mixed = CONVERSIONS[request.param]
    if base == "bfloat16 without its vision tower":
        source = build_hf_checkpoint(tmp_path_factory.mktemp("hf") / "Tiny-text", vision=False)
    else:
        source = hf_base[0] if base == "bfloat16" else float16_base
    out = tmp_path_factory.mktemp("q") / "Tiny-q"
    convert(source, out, bits=bits, group_size=group, mtp=True, quant_predicate=mixed)
    loaded = load_model(str(out))
    load_drafter(loaded, f"{out}-mtp")
    return loaded


def _generate(decoder, prefilled, block, max_tokens=40):
    """Greedy tokens at ``block`` from a copy of ``prefilled`` (state, first token): the prompt is fed once a
    prompt, as the app's prompt cache feeds it once a conversation."""
    state, first = prefilled
    return [t for step in decoder.decode(state.snapshot(), first, max_tokens=max_tokens, block=block,
                                         sampling=Sampling(), stop_ids=set(), cancelled=lambda: False)
            for t in step.tokens]


def test_greedy_output_with_the_drafter_is_drafter_off_output(conversion):
    from engines.mlx.prompts import PromptBuilder

    assert conversion.drafter_kind == "mtp"
    decoder = Decoder(conversion.model, conversion.drafter)
    assert decoder.drafter is not None  # the own loop drafts with this head
    for text in PROMPTS:
        ids = PromptBuilder(conversion).conversation_ids("You are a helpful assistant.", [Message("user", text)],
                                                         False)
        state = decoder.new_state()
        prefilled = (state, decoder.feed(state, ids, 0, Sampling()))
        plain = _generate(decoder, prefilled, 1)
        for block in BLOCKS:
            assert _generate(decoder, prefilled, block) == plain, f"{text!r} at block {block}"


def _quantized_records(body):
    """Every linear layer record of the body that holds a quantized layer."""
    records = []
    for layer in body.layers:
        mixer = layer.mixer
        group = getattr(mixer, "qkv", None) or mixer.inputs
        records += [*group.layers, getattr(mixer, "o_proj", None) or mixer.out_proj]
        if layer.mlp.gate_up is not None:
            records += [*layer.mlp.gate_up.layers, layer.mlp.down]
    return [record for record in records if record.scales is not None]


def test_off_cuda_a_quantized_layer_runs_mlx_vlms_verify_route_one_row_at_a_time_exact(conversion):
    """Off CUDA each quantized layer is called through mlx-vlm's verify route (on Metal: its few-row kernels, which
    give each row its one-row product's numbers; here: the layer itself), equal to MLX's own quantized product, and
    each row of a product over several rows is that row's product alone, bit for bit."""
    import mlx.core as mx

    from engines.mlx import library, qwen35
    from engines.mlx.cuda import use_cuda_kernel

    if use_cuda_kernel():
        pytest.skip("on CUDA specchat's own kernel computes every quantized product (test_quantized_skinny.py)")
    route = library.verify_linear()
    records = _quantized_records(qwen35.body(conversion.model))
    assert records and all(record.call.route is route for record in records)
    for record in records:
        module = record.call.module
        x = mx.random.normal((1, 6, module.weight.shape[1] * 32 // module.bits), key=mx.random.key(3))
        x = x.astype(module.scales.dtype)
        rows = record(x)
        if not mx.metal.is_available():
            assert mx.array_equal(rows, module(x))  # the route is the layer itself here
        # on Metal mlx-vlm's kernels are MLX's own quantized product up to the output's rounding
        magnitude = product_magnitude(x, module.weight, module.scales, getattr(module, "biases", None),
                                      module.group_size, module.bits)
        if getattr(module, "bias", None) is not None:
            magnitude = magnitude + mx.abs(module.bias.astype(mx.float32))
        error = mx.abs(rows.astype(mx.float32) - module(x).astype(mx.float32))
        assert (error <= 1e-2 * magnitude).all().item()
        for r in range(x.shape[1]):
            assert mx.array_equal(rows[:, r], record(x[:, r : r + 1])[:, 0]), r


def test_a_prompts_chunk_takes_the_layers_own_product_and_a_verify_the_route(conversion):
    """mlx-vlm's verify kernels are built per number of rows and for a few: a prompt's chunk of many rows must not
    go through them."""
    import mlx.core as mx

    from engines.mlx import library, qwen35
    from engines.mlx.cuda.quantized_skinny import MAX_ROWS

    route = library.verify_linear()
    module = conversion.model.language_model.model.layers[0].mlp.down_proj
    routed = []
    call = qwen35.VerifyRoute(module, lambda layer, x: routed.append(x.shape[1]) or route(layer, x))
    k = module.weight.shape[1] * 32 // module.bits
    for rows in (1, 4, MAX_ROWS, MAX_ROWS + 1, 300):
        x = mx.random.normal((1, rows, k), key=mx.random.key(rows)).astype(module.scales.dtype)
        assert call(x).shape == module(x).shape
    assert routed == [1, 4, MAX_ROWS]
