"""The full-acceptance rig: its shapes, its weights, and every draft accepted by the engine's own loop."""

import pytest

from demo_model.rig import SIZES, build_rig, parameter_count

TOKENS = 40
SMALL = {"hidden": 64, "layers": 4, "intermediate": 128, "vocab": 1024}


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def rig(request, tmp_path_factory):
    return build_rig(tmp_path_factory.mktemp("rigs") / f"rig-{request.param}", dtype=request.param, **SMALL)


@pytest.fixture(scope="module")
def loaded(rig):
    from engines.mlx.loading import load_drafter, load_model

    loaded = load_model(str(rig))
    load_drafter(loaded, None)
    return loaded


def decoder_for(loaded):
    """The engine's own loop on this checkpoint, built as the MLX engine builds it."""
    from engines.mlx.engine import own_decoder

    decoder, stop_ids, _, _ = own_decoder(loaded)
    assert decoder is not None and decoder.drafter is not None
    return decoder, stop_ids


def generate(loaded, decoder, stop_ids, block: int, tokens: int = TOKENS) -> tuple[list[int], list[int]]:
    """Greedy tokens for one prompt at ``block`` (1: drafter off), and the drafts accepted per round."""
    from engines.mlx.decoding import Sampling

    ids = loaded.tokenizer.encode("<|im_start|>user\nhello, rig<|im_end|>\n<|im_start|>assistant\n",
                                  add_special_tokens=False)
    state = decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    out, accepted = [], []
    for step in decoder.decode(state, first, max_tokens=tokens, block=block, sampling=Sampling(),
                               stop_ids=stop_ids, cancelled=lambda: False):
        out += step.tokens
        if step.accepted is not None:
            accepted.append(step.accepted)
    return out, accepted


def test_sizes_have_the_parameter_counts_measured_before():
    expected = {"100m": 100e6, "717m": 717e6, "4b": 4.1e9}
    for size, count in expected.items():
        body, head = parameter_count(SIZES[size])
        assert abs(body - count) / count < 0.01, (size, body)
        assert 0 < head < body / 8
    body, _ = parameter_count(SIZES["cpu"])
    assert 25e6 <= body <= 40e6
    assert [SIZES[s].dtype for s in ("cpu", "100m", "717m", "4b")] == ["float32", "float32", "bfloat16", "bfloat16"]
    assert [(SIZES[s].hidden, SIZES[s].layers) for s in ("100m", "717m", "4b")] == [(1024, 8), (2048, 16), (4096, 24)]


def test_output_projections_are_zero_and_the_head_passes_its_embedding_through(rig):
    import mlx.core as mx

    weights = mx.load(str(rig / "model.safetensors"))
    zeroed = [k for k in weights if k.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight"))
              and not k.startswith("vision_tower.")]
    kinds = {k.split(".")[-2] for k in zeroed}
    assert kinds == {"o_proj", "out_proj", "down_proj"}
    assert any(k.startswith("mtp.") for k in zeroed) and any(k.startswith("language_model.") for k in zeroed)
    assert all(not mx.any(weights[k]).item() for k in zeroed)
    # Everything else is random, as in a real checkpoint of this shape.
    assert mx.any(weights["language_model.model.layers.0.mlp.up_proj.weight"]).item()
    hidden = SMALL["hidden"]
    fc = weights["mtp.fc.weight"].astype(mx.float32)
    assert fc.shape == (hidden, 2 * hidden)
    assert mx.array_equal(fc[:, :hidden], mx.eye(hidden)).item()
    assert not mx.any(fc[:, hidden:]).item()


def test_greedy_output_is_the_same_at_every_block_and_every_draft_is_accepted(loaded):
    decoder, stop_ids = decoder_for(loaded)
    reference, rounds = generate(loaded, decoder, stop_ids, 1)
    assert rounds == []  # block 1: plain steps
    assert len(reference) == TOKENS  # the rig never stops early: every block is compared over all tokens
    assert len(set(reference)) > TOKENS // 2  # a walk through many words, not one token repeated
    for block in range(2, 7):
        tokens, accepted = generate(loaded, decoder, stop_ids, block)
        assert tokens == reference, f"block {block}"
        assert len(accepted) >= (TOKENS - 1) // block
        # Every round keeps all its drafts; only the last may be cut short by the token limit.
        assert all(a == block - 1 for a in accepted[:-1]), (block, accepted)
        assert accepted[-1] <= block - 1


def test_a_head_that_disagrees_is_caught(loaded):
    """The checks above can fail: with a random fc the head guesses wrong, and rounds accept less."""
    import mlx.core as mx

    decoder, stop_ids = decoder_for(loaded)
    reference, _ = generate(loaded, decoder, stop_ids, 1)
    fc = loaded.drafter.fc.weight
    try:
        loaded.drafter.fc.weight = mx.random.normal(fc.shape, key=mx.random.key(1)).astype(fc.dtype)
        tokens, accepted = generate(loaded, decoder_for(loaded)[0], stop_ids, 4)
    finally:
        loaded.drafter.fc.weight = fc
    assert tokens == reference  # greedy output never depends on the drafts
    assert sum(accepted[:-1]) < 3 * len(accepted[:-1])


@pytest.mark.slow
def test_a_rig_that_sees_keeps_every_draft_after_an_image(tmp_path):
    """--vision: the engine sees (a tower and Qwen's processor), an image's tokens are prefilled, and every
    draft after it is still accepted, with the same greedy text at block 4 as drafter off."""
    import io

    from PIL import Image as Picture

    from engines import Message, Turn
    from engines.mlx import MlxEngine
    from tests.support.engine_runs import OPTIONS, run
    from webapp.conversations.images import read_image

    rig = build_rig(tmp_path / "rig-vision", vision=True, **SMALL)
    assert (rig / "preprocessor_config.json").is_file()
    out = io.BytesIO()
    Picture.new("RGB", (96, 64), (30, 60, 90)).save(out, format="PNG")
    image = read_image(out.getvalue()).as_image()
    engine = MlxEngine(str(rig))
    engine.load(OPTIONS)
    try:
        assert engine.info().vision is True
        said = {}
        for block in (1, 4):
            options = OPTIONS.updated({"reasoning_budget": 0, "max_tokens": 24, "speculative": block > 1,
                                       "draft_block_size": max(block, 2)})
            done, events = run(engine, Turn(f"t{block}", f"c{block}", [Message("user", "look", images=(image,))],
                                            options))
            said[block] = "".join(getattr(e, "text", "") for e in events)
            assert done.finish_reason == "length" and done.stats["image_tokens"] == 6  # 96×64 px: 3×2 tokens
            if block > 1:
                assert done.stats["acceptance"] == 1.0
        assert said[4] == said[1]
    finally:
        engine.unload()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_rig_with_a_chosen_acceptance_drafts_about_that_share_and_keeps_its_output(tmp_path, dtype):
    """--acceptance P: the head agrees on a share P of the words (exactly, by construction), the engine's
    rounds keep about P at depth 1 and about P² at depth 2, drafts are rejected, and the greedy text is the
    drafter-off text at every block."""
    from demo_model.rig import head_share

    rig = build_rig(tmp_path / f"rig-70-{dtype}", dtype=dtype, acceptance=0.7, **SMALL)
    assert abs(head_share(rig) - 0.7) <= 0.01
    from engines.mlx.loading import load_drafter, load_model

    loaded = load_model(str(rig))
    load_drafter(loaded, None)
    decoder, stop_ids = decoder_for(loaded)
    reference, _ = generate(loaded, decoder, stop_ids, 1, tokens=400)
    for block in (2, 3, 4):
        tokens, accepted = generate(loaded, decoder, stop_ids, block, tokens=400)
        assert tokens == reference, f"block {block}"
        assert min(accepted) < block - 1  # rounds with rejected drafts happened
        first = sum(a >= 1 for a in accepted[:-1]) / len(accepted[:-1])
        assert abs(first - 0.7) <= 0.12, (block, first)
        if block >= 3:
            second = sum(a >= 2 for a in accepted[:-1]) / len(accepted[:-1])
            assert abs(second - 0.49) <= 0.12, (block, second)


@pytest.mark.slow
def test_rejected_drafts_leave_the_caches_as_a_drafter_off_run_has_them(tmp_path):
    """After rounds that rejected drafts, every layer's state (attention keys and values up to the offset, the
    gated-delta layers' convolution and recurrent state) is what plain steps over the same tokens leave, up to
    the rounding of a k-row product against a one-row one on this BLAS (about 1e-6 of each value): a rollback
    undoes what the rejected tokens wrote. One left in would shift a convolution window or a recurrent state by
    a whole token's update, far past this bound."""
    import mlx.core as mx

    from engines.mlx.decoding import Sampling
    from engines.mlx.loading import load_drafter, load_model

    loaded = load_model(str(build_rig(tmp_path / "rig-60", acceptance=0.6, **SMALL)))
    load_drafter(loaded, None)
    decoder, stop_ids = decoder_for(loaded)
    prompt = loaded.tokenizer.encode("<|im_start|>user\nhello, rig<|im_end|>\n<|im_start|>assistant\n",
                                     add_special_tokens=False)

    def state_after(block: int, tokens: int):
        state = decoder.new_state()
        first = decoder.feed(state, prompt, 0, Sampling())
        rejected = 0
        for step in decoder.decode(state, first, max_tokens=tokens, block=block, sampling=Sampling(),
                                   stop_ids=stop_ids, cancelled=lambda: False):
            rejected += step.accepted is not None and step.accepted < step.proposed
        return state, rejected

    drafted, rejected = state_after(4, 60)
    assert rejected >= 3
    plain, _ = state_after(1, 60)
    while len(plain.ids) != len(drafted.ids):  # the same tokens in both caches
        plain, _ = state_after(1, 60 - (len(plain.ids) - len(drafted.ids)))
    assert plain.ids == drafted.ids
    target, reference = drafted.target, plain.target
    assert target.offset == reference.offset == len(drafted.ids)
    for n, ((a, b), (c, d)) in enumerate(zip(target.layers, reference.layers)):
        if a.ndim == 4 and a.shape[2] == target.capacity:  # attention buffers: the filled slots
            a, b, c, d = (x[:, :, :target.offset] for x in (a, b, c, d))
        for mine, plain_ in ((a, c), (b, d)):
            worst = mx.max(mx.abs(mine.astype(mx.float32) - plain_.astype(mx.float32))).item()
            assert worst <= 1e-4 * max(1.0, mx.max(mx.abs(plain_)).item()), (n, worst)
