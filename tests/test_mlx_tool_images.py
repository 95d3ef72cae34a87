"""A tool's result with an image, on a tiny Qwen 3.5 that can see: the step after the call holds the image's run of
placeholders (as many as its size makes) after the reply's own ids, the vision tower runs on it, and the reply
depends on the image's pixels. Two chat templates: one that writes a tool message's images inside its
``<tool_response>`` as Qwen 3.5's does, and the checkpoint's own, which writes no tool message at all, where the
images go in a user message after the results."""

import json
import shutil

import pytest

from engines import Answer, Message, Thinking, ToolCall, Turn
from engines.tool_calls import TOOL_IMAGES
from tests.support.engine_runs import run, text
from tests.support.tool_model import TEMPLATE
from tests.test_mlx_vision import options, picture

CALLS = (ToolCall("call-1", "camera"), ToolCall("call-2", "clock"))
QUESTION = "what is this?"
# Qwen 3.5's template writes an image part as its placeholder wherever a message has one, a tool's result included.
TEXT_ONLY = "{%- for part in content if part.type == 'text' -%}{{ part.text }}{%- endfor -%}"
WITH_IMAGES = ("{%- for part in content -%}{%- if part.type == 'image' -%}<|vision_start|><|image_pad|><|vision_end|>"
               "{%- else -%}{{ part.text }}{%- endif -%}{%- endfor -%}")


def qwen_like(vision_model, folder):
    """The vision checkpoint with a Qwen 3.5-style template that writes tools' results, images included."""
    assert TEXT_ONLY in TEMPLATE
    template = TEMPLATE.replace(TEXT_ONLY, WITH_IMAGES)
    shutil.copytree(vision_model, folder)
    (folder / "chat_template.jinja").write_text(template)
    config = folder / "tokenizer_config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"chat_template": template}))
    return folder


@pytest.fixture(scope="module", params=["inline", "after"])
def engine(request, vision_model, tmp_path_factory):
    from engines.mlx.engine import MlxEngine

    folder = vision_model if request.param == "after" else qwen_like(vision_model, tmp_path_factory.mktemp("t") / "m")
    engine = MlxEngine(str(folder), drafter="none")
    engine.load(options())
    assert engine.info().state == "ready" and engine.info().vision, engine.info().message
    assert engine._prompts.tool_images_inline is (request.param == "inline")
    yield engine
    engine.unload()


def stream(engine, turn: Turn) -> tuple[str, dict]:
    """(thinking and answer text, final stats) of one turn; fails on an error."""
    done, events = run(engine, turn)
    assert done.finish_reason in ("stop", "length"), (done.error_code, done.error_message)
    return text(events, Thinking) + text(events, Answer), done.stats


def after_a_call(engine, cid: str, image) -> tuple[Turn, list[int]]:
    """The step after the model's two calls, the first one's result holding ``image``, and the ids the model has
    seen before it."""
    asked = [Message("user", QUESTION)]
    said, _ = stream(engine, Turn(f"{cid}-1", cid, asked, options()))
    seen = list(engine._conversations.get(cid).ids)
    results = [Message("tool", "a photo", images=(image,), tool_call_id=CALLS[0].call),
               Message("tool", "noon", tool_call_id=CALLS[1].call)]
    turn = Turn(f"{cid}-2", cid, [*asked, Message("assistant", said, tool_calls=CALLS), *results], options())
    return turn, seen


def test_the_step_after_the_call_prefills_the_images_placeholders_and_runs_the_tower(engine):
    prompts, image = engine._prompts, picture(3)
    count = prompts.images.token_count(image)
    assert count == 12  # 140×100 → 128×96 → 4×3 merged patches
    cid = f"tool-image-{prompts.tool_images_inline}"
    turn, seen = after_a_call(engine, cid, image)
    _, ids = engine._turn_input(turn)
    assert ids[: len(seen)] == seen  # the reply's own ids go on: only the result is new
    token = prompts.image_token
    added = ids[len(seen):]
    assert added.count(token) == count and token not in seen
    start = added.index(token)
    assert added[start : start + count] == [token] * count
    written = prompts._loaded.tokenizer.decode(added)
    if prompts.tool_images_inline:  # inside its result, before its text
        assert written.index("<tool_response>") < written.index("<|vision_start|>") < written.index("a photo")
        assert written.index("a photo") < written.index("noon") and TOOL_IMAGES not in written
    else:  # in a user message that says what it is (this template writes no tool message at all)
        assert written.startswith(prompts.eos_text) and "<|im_start|>user" in written and TOOL_IMAGES in written
        assert "a photo" not in written
    _, stats = stream(engine, turn)
    assert stats["image_tokens"] == count and stats["vision_ms"] is not None
    assert stats["cached_tokens"] >= len(seen) - 1  # nothing before the result was prefilled again


def test_the_reply_after_the_call_depends_on_the_images_pixels(engine):
    """Two images of one size are the same ids: only the tower's features tell them apart."""
    replies = []
    for seed in (0, 1):
        turn, _ = after_a_call(engine, f"pixels-{seed}-{engine._prompts.tool_images_inline}", picture(seed))
        replies.append(stream(engine, turn)[0])
    assert replies[0] != replies[1]
