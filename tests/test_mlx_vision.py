"""Images on the MLX engine, on a tiny Qwen 3.5 that can see (converted by mlx_vlm.convert as users get one):
the checkpoint's own processor and tower, M-RoPE positions after an image on both decode loops, caches keyed by
the images' content, image tokens in the context window, and the refusal on a model that cannot see."""

import hashlib
import io

import pytest

from engines import Done, EngineError, GenerationOptions, Message, Turn
from engines.base import Image

MAX_TOKENS = 24
QUESTION = "what is this?"


def picture(seed: int, size=(140, 100)) -> Image:
    """A PNG of random pixels: ``seed`` tells its content apart, ``size`` its placeholder count."""
    import numpy as np
    from PIL import Image as PILImage

    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    out = io.BytesIO()
    PILImage.fromarray(pixels).save(out, "PNG")
    data = out.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    return Image(sha[:16], sha, "image/png", size[0], size[1], data)


def options(**changes) -> GenerationOptions:
    base = {"reasoning_budget": 0, "max_tokens": MAX_TOKENS, "temperature": 0.0, "speculative": False}
    return GenerationOptions(**(base | changes))


def reply(engine, cid: str, messages: list[Message], **changes) -> tuple[str, dict]:
    """(answer text, final stats) of one greedy turn; fails on an error."""
    text, done = "", None
    for event in engine.stream(Turn(f"t-{cid}-{len(messages)}", cid, messages, options(**changes))):
        if isinstance(event, Done):
            done = event
        else:
            text += getattr(event, "text", "")
    assert done.finish_reason in ("stop", "length"), (done.error_code, done.error_message)
    return text, done.stats


@pytest.fixture(scope="module")
def engine(vision_model):
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(vision_model))
    engine.load(options())
    assert engine.info().state == "ready", engine.info().message
    yield engine
    engine.unload()


@pytest.fixture(scope="module")
def reference(vision_model):
    """mlx-vlm's own model and processor, loaded apart from the engine's."""
    from mlx_vlm import load

    return load(str(vision_model))[:2]


def vlm_tokens(reference, engine, messages: list[Message], max_tokens: int = MAX_TOKENS, **kwargs) -> list[int]:
    """mlx-vlm's ``stream_generate`` on the engine's prompt ids, given the images through its processor."""
    import mlx.core as mx
    from mlx_vlm import stream_generate

    model, processor = reference
    prompts = engine._prompts
    ids = prompts.conversation_ids(options().system_prompt, messages, False)
    images = [image for m in messages for image in m.images]
    from engines.mlx.images import pil_image

    if images:
        inputs = processor.image_processor([pil_image(image) for image in images])
        kwargs |= {"pixel_values": mx.array(inputs["pixel_values"]),
                   "image_grid_thw": mx.array(inputs["image_grid_thw"])}
    stream = stream_generate(model, processor, "", input_ids=mx.array([ids]), max_tokens=max_tokens,
                             temperature=0.0, **kwargs)
    return [chunk.token for chunk in stream if chunk.finish_reason is None]


def vlm_text(reference, engine, messages, **kwargs) -> str:
    tokens = vlm_tokens(reference, engine, messages, **kwargs)
    stops = engine._stop_ids
    kept = tokens[: next((i for i, t in enumerate(tokens) if t in stops), len(tokens))]
    return engine._prompts._loaded.tokenizer.decode(kept)


# What the checkpoint holds and what the engine says of it.

def test_the_vision_checkpoint_is_laid_out_as_users_have_it(vision_model):
    import json

    import mlx.core as mx

    processor = json.loads((vision_model / "preprocessor_config.json").read_text())
    assert processor["size"]["longest_edge"] == 64 * 32 * 32 and processor["patch_size"] == 16
    weights = mx.load(str(vision_model / "model.safetensors"))
    assert any(key.startswith("vision_tower.") for key in weights)
    head = vision_model.with_name("Tiny-VL-4bit-mtp")  # the MTP head, as --mtp writes it beside
    assert json.loads((head / "config.json").read_text())["model_type"] == "qwen3_5_mtp"
    assert any(key.startswith("layers.0.") for key in mx.load(str(head / "model.safetensors")))


def test_a_model_that_can_see_says_so(engine):
    info = engine.info()
    assert info.vision is True and info.vision_note is None
    assert info.to_dict()["vision"] is True


@pytest.mark.slow
def test_the_demo_model_cannot_see_and_refuses_images():
    from demo_model import DEFAULT_MODEL
    from engines.mlx.engine import MlxEngine

    demo = MlxEngine(str(DEFAULT_MODEL), drafter="none")
    demo.load(options())
    try:
        info = demo.info()
        assert info.state == "ready" and info.vision is False
        assert "image processor config" in info.vision_note and "Load a checkpoint" in info.vision_note
        with pytest.raises(EngineError) as refused:
            demo.stream(Turn("t", "c", [Message("user", QUESTION, images=(picture(0),))], options()))
        assert refused.value.code == "no_vision" and refused.value.message == info.vision_note
        text, _ = reply(demo, "c", [Message("user", QUESTION)])  # text goes on
        assert text
    finally:
        demo.unload()


@pytest.mark.slow
def test_a_conversion_without_its_tower_cannot_see(tmp_path):
    from demo_model.hf_layout import build_vision_checkpoint
    from engines.mlx.engine import MlxEngine

    blind = MlxEngine(str(build_vision_checkpoint(tmp_path / "Tiny-blind", vision=False)), drafter="none")
    blind.load(options())
    try:
        info = blind.info()
        assert info.state == "ready" and info.vision is False
        assert "no vision tower" in info.vision_note
        with pytest.raises(EngineError) as refused:
            blind.stream(Turn("t", "c", [Message("user", QUESTION, images=(picture(0),))], options()))
        assert refused.value.code == "no_vision"
    finally:
        blind.unload()


# Prompts and the context window.

def test_each_image_becomes_its_processors_run_of_placeholders(engine):
    prompts = engine._prompts
    wide, square = picture(0), picture(1, (64, 64))
    counts = [prompts.images.token_count(image) for image in (wide, square)]
    assert counts == [12, 4]  # 140×100 → 128×96 → 4×3 merged patches; 64×64 → 2×2
    ids = prompts.conversation_ids("", [Message("user", QUESTION, images=(wide, square))], False)
    token = prompts.image_token
    start = ids.index(token)
    assert ids[start : start + 12] == [token] * 12 and ids[start + 12] != token
    assert ids.count(token) == 16
    # A next turn appended as tokens holds its images' runs the same way.
    first = prompts.conversation_ids("", [Message("user", "hi")], False)
    following = prompts.next_turn_ids(first, False, QUESTION, False, (square,))
    assert following[: len(first)] == first and following.count(token) == 4


def test_prompt_size_counts_image_tokens(engine):
    plain = Message("user", QUESTION)
    one = Message("user", QUESTION, images=(picture(0),))
    two = Message("user", QUESTION, images=(picture(0), picture(1, (256, 256))))
    sizes = [engine.prompt_size([m], options())[0] for m in (plain, one, two)]
    # Each image adds its placeholders and the two tokens around them.
    assert sizes[1] - sizes[0] == 12 + 2
    assert sizes[2] - sizes[0] == 12 + 64 + 4


def test_the_context_guard_drops_older_turns_with_their_images(engine, monkeypatch):
    from webapp.conversations.window import fit

    history = []
    for i in range(6):
        history += [Message("user", f"{QUESTION} {i}", images=(picture(i, (256, 256)),)), Message("assistant", "ok")]
    history.append(Message("user", QUESTION, images=(picture(9, (256, 256)),)))
    ids = [f"m{i}" for i in range(len(history))]
    text_only = [Message(m.role, m.content) for m in history]
    full = engine.prompt_size(history, options())[0]
    limit = full - 100  # the text alone would fit; the images' tokens do not
    assert engine.prompt_size(text_only, options())[0] + 64 < limit
    monkeypatch.setattr(engine, "_context_limit", lambda: limit)
    kept, window = fit(engine, history, ids, options(max_tokens=16))
    assert window.dropped > 0 and kept[-1] is history[-1]
    assert engine.prompt_size(kept, options())[0] + 16 <= limit


# Positions after an image: the own loop computes what mlx-vlm's model does.

@pytest.mark.slow
def test_text_after_an_image_is_rotated_at_mlx_vlms_mrope_positions(vision_model, reference):
    """The own loop's prompt and next steps give mlx-vlm's logits at every position after the image; with the
    rope delta left out they would not."""
    import mlx.core as mx

    from engines.mlx.decoding import Decoder, Sampling
    from engines.mlx.images import ImageProcessing
    from engines.mlx.loading import load_model
    from engines.mlx.prompts import PromptBuilder

    loaded = load_model(str(vision_model))
    prompts = PromptBuilder(loaded, vision=True)
    images = (picture(1), picture(2, (64, 96)))
    ids = prompts.conversation_ids("", [Message("user", QUESTION, images=images)], False)
    processing = ImageProcessing(loaded.processor)
    pixels, grids = processing.inputs(images)
    decoder = Decoder(loaded.model)
    features = decoder.vision.encode(pixels, grids)

    def run(shift_kept: bool) -> list:
        state = decoder.new_state()
        feed = decoder.image_feed(ids, 0, features, grids)
        if not shift_kept:
            feed = type(feed)(feed.embeds, feed.positions, 0)
        first = decoder.feed(state, ids, 0, Sampling(), images=feed)
        tokens, logits = [int(first.item())], []
        for _ in range(6):
            result = decoder.target.verify(state.target, mx.array([[tokens[-1]]]), greedy=False)
            decoder.target.commit(state.target, result, 1)
            logits.append(result.logits[0, -1].astype(mx.float32))
            tokens.append(int(mx.argmax(result.logits[0, -1]).item()))
        return tokens, logits, state

    tokens, ours, state = run(True)
    assert state.target.shift < 0  # an image's tokens span fewer positions than slots
    model, _ = reference
    full = mx.array([ids + tokens[:-1]])
    logits = model(full, pixel_values=pixels, image_grid_thw=grids).logits[0, len(ids) - 1 :].astype(mx.float32)
    assert tokens == [int(mx.argmax(row).item()) for row in logits]
    theirs = logits[1:]  # where the steps after the first token read
    gaps = [mx.abs(logit - theirs[i]).max().item() for i, logit in enumerate(ours)]
    _, unshifted, _ = run(False)
    wrong = [mx.abs(logit - theirs[i]).max().item() for i, logit in enumerate(unshifted)]
    print("largest logit gap to mlx-vlm's:", max(gaps), "with the rope delta left out:", max(wrong))
    assert max(gaps) < 0.02 * mx.abs(theirs).max().item()
    assert max(wrong) > 10 * max(max(gaps), 1e-3)


# Greedy identity: drafter on and off, the own loop and mlx-vlm's, one and two images.

@pytest.fixture(scope="module")
def reference_drafter(vision_model):
    from mlx_vlm.speculative.drafters import load_drafter

    return load_drafter(str(vision_model.with_name("Tiny-VL-4bit-mtp")))


@pytest.mark.slow
@pytest.mark.parametrize("images", [(picture(1),), (picture(1), picture(11, (96, 64)))], ids=["one", "two"])
def test_greedy_output_is_mlx_vlms_on_both_loops_at_blocks_1_to_4(engine, reference, reference_drafter, images):
    """The own loop, drafter off and at blocks 2-4, gives what mlx-vlm's ``stream_generate`` gives without a
    drafter; the engine's mlx-vlm loop gives what ``stream_generate`` gives at the same block. (mlx-vlm's own
    drafted verify may round a near-tie differently from its one-row step on this CPU: with one image here it
    does, at a logit margin of 0.016.)"""
    messages = [Message("user", QUESTION, images=images)]
    expected = vlm_text(reference, engine, messages)
    assert len(set(expected.split())) > 1  # a reply that says more than one word, so that a shift would show
    drafter, kind = reference_drafter
    for loop in ("specchat", "mlx-vlm"):
        for block in (1, 2, 3, 4):
            want = expected
            if loop == "mlx-vlm" and block > 1:
                want = vlm_text(reference, engine, messages, draft_model=drafter, draft_kind=kind,
                                draft_block_size=block)
            text, stats = reply(engine, f"identity-{len(images)}-{loop}-{block}", messages, decode_loop=loop,
                                speculative=block > 1, draft_block_size=max(block, 2))
            assert text == want, (loop, block)
            assert stats["decode_loop"] == loop and stats["image_tokens"] == sum(
                engine._prompts.images.token_count(image) for image in images)
            if block > 1:
                assert stats["drafted"], (loop, block)


# Caches keyed by the images' content.

@pytest.mark.slow
@pytest.mark.parametrize("loop", ["specchat", "mlx-vlm"])
def test_a_different_image_of_the_same_size_is_never_served_from_the_first_ones_cache(engine, reference, loop):
    first, second = picture(1), picture(0)  # one size: the same prompt ids
    prompts = engine._prompts
    asked = [[Message("user", QUESTION, images=(image,))] for image in (first, second)]
    ids = [prompts.conversation_ids(options().system_prompt, m, False) for m in asked]
    assert ids[0] == ids[1]
    image_at = ids[0].index(prompts.image_token)

    text_a, stats_a = reply(engine, f"same-size-a-{loop}", asked[0], decode_loop=loop)
    text_b, stats_b = reply(engine, f"same-size-b-{loop}", asked[1], decode_loop=loop)
    assert stats_b["cached_tokens"] < image_at  # at most the system prompt came from a cache
    assert stats_b["vision_ms"] is not None  # the second image went through the tower
    assert text_a != text_b
    assert text_b == vlm_text(reference, engine, asked[1])

    # The same conversation, its first message edited to hold the other image: nothing past the system
    # prompt is reused, and the reply is a fresh one's.
    reply(engine, f"edited-{loop}", asked[0], decode_loop=loop)
    edited = asked[1] + [Message("assistant", text_a), Message("user", "and now?")]
    _, stats = reply(engine, f"edited-{loop}", edited, decode_loop=loop)
    assert stats["cached_tokens"] < image_at and stats["vision_ms"] is not None


@pytest.mark.slow
def test_two_images_of_one_size_give_different_prefill_states(engine):
    states = []
    for i, image in enumerate((picture(1), picture(0))):
        reply(engine, f"state-{i}", [Message("user", QUESTION, images=(image,))], decode_loop="specchat")
        states.append(engine._conversations.get(f"state-{i}").decode)
    import mlx.core as mx

    assert states[0].ids[:-MAX_TOKENS] == states[1].ids[:-MAX_TOKENS]
    assert states[0].images != states[1].images
    keys = [s.target.layers[1][0] for s in states]  # the first attention layer's keys
    assert not mx.allclose(keys[0], keys[1]).item()


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["specchat", "mlx-vlm"])
def test_a_follow_up_about_the_same_image_reuses_the_cache(engine, loop):
    images = (picture(5, (256, 256)), picture(6, (256, 256)))  # 128 image tokens: the first turn's bulk
    cid = f"follow-up-{loop}"
    question = [Message("user", QUESTION, images=images)]
    text, first = reply(engine, cid, question, decode_loop=loop)
    assert first["vision_ms"] > 0 and first["prefill_ms"] > 0 and first["image_tokens"] == 128
    follow = question + [Message("assistant", text), Message("user", "and the colours?")]
    _, second = reply(engine, cid, follow, decode_loop=loop)
    assert second["cached_tokens"] >= first["prompt_tokens"]  # the whole first turn came from the cache
    assert second["vision_ms"] is None  # the tower did not run again
    assert second["image_tokens"] == 128  # the prompt still holds the images
    ratio = second["ttft_ms"] / first["ttft_ms"]
    print(f"{loop}: first turn {first['ttft_ms']} ms (vision {first['vision_ms']}, prefill {first['prefill_ms']}), "
          f"follow-up {second['ttft_ms']} ms ({second['prompt_tokens'] - second['cached_tokens']} new tokens): "
          f"{ratio:.2f}")
    assert ratio < 0.5
