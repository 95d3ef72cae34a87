"""Where a greedy race's lanes part, ``first_divergence`` says how near a tie it was (``margin``).

The checkpoint is the tiny model with one more token whose embedding row (tied to the LM head) is the
greedy reply's fourth token's, scaled by 1 + 1e-7: wherever that token wins, the two logits are a rounding
apart, and the k-row verify and the one-row step round them differently on some machines, so drafting
really changes the greedy output there. On a machine where they round alike the module skips.
"""

import shutil

import pytest
import requests

from engines import Answer, Done, GenerationOptions, Message, Turn, guarded
from tests.support.harness import ServerProcess
from tests.support.wsclient import WsClient, set_settings

PROMPT = "What is 347 + 589?"
OFF = GenerationOptions(reasoning_budget=0, max_tokens=16, temperature=0.0, speculative=False)
ON = OFF.updated({"speculative": True, "draft_block_size": 4})
KEY = "language_model.model.embed_tokens.weight"


def _reply(engine, options, conversation):
    turn = Turn(id="t", conversation_id=conversation, messages=[Message("user", PROMPT)], options=options)
    events = list(guarded(engine.stream(turn)))
    assert isinstance(events[-1], Done) and events[-1].finish_reason in ("stop", "length")
    return "".join(e.text for e in events if isinstance(e, Answer))


def _engine(path):
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(path))
    engine.load(GenerationOptions())
    return engine


def _near_tie(tiny_model, out, scale):
    """The tiny checkpoint with its last word token's row replaced by the reply's fourth token's row × ``scale``."""
    import mlx.core as mx

    engine = _engine(tiny_model)
    try:
        ids = engine._prompts.encode(_reply(engine, OFF, "plain"))
    finally:
        engine.unload()
    weights = mx.load(str(tiny_model / "model.safetensors"))
    embed = weights[KEY]
    twin = max(i for i in range(embed.shape[0]) if i not in ids and float(mx.abs(embed[i]).sum()) > 0)
    weights[KEY] = mx.concatenate([embed[:twin], embed[ids[3]][None] * scale, embed[twin + 1:]])
    shutil.copytree(tiny_model, out)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    return out


@pytest.fixture(scope="module")
def near_tie(tiny_model, tmp_path_factory):
    """(checkpoint, its engine, the drafter-off reply, the drafter-on reply), the two replies differing."""
    for n, scale in enumerate((1 + 1e-7, 1 + 2e-7, 1 - 1e-7)):
        path = _near_tie(tiny_model, tmp_path_factory.mktemp("near-tie") / f"tiny-near-tie-{n}", scale)
        engine = _engine(path)
        off, on = _reply(engine, OFF, "off"), _reply(engine, ON, "on")
        if off != on:
            yield path, engine, off, on
            engine.unload()
            return
        engine.unload()
    pytest.skip("this machine's k-row and one-row products round the near-tie alike: the lanes never part")


def _gap(engine, off, on):
    """The same gap from mlx-vlm's own forward over the prompt and the replies' common tokens, and the two
    tokens where they part."""
    import mlx.core as mx

    ours, theirs = (engine._prompts.continuation_ids(OFF.system_prompt, [Message("user", PROMPT),
                                                                         Message("assistant", text)], False)
                    for text in (off, on))
    common = next(i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b)
    logits = engine._loaded.model.language_model(mx.array([ours[:common]])).logits[0, -1].astype(mx.float32)
    first, second = sorted(mx.topk(logits, 2).tolist(), reverse=True)
    return first - second, (ours[common], theirs[common]), logits


def _margin(engine, off, on):
    return engine.divergence_margin([Message("user", PROMPT)], OFF, Message("assistant", off),
                                    Message("assistant", on))


def test_the_margin_where_a_near_tie_rounded_differently_is_a_rounding(near_tie):
    import mlx.core as mx

    _, engine, off, on = near_tie
    margin = _margin(engine, off, on)
    assert margin is not None and 0 <= margin < 1e-3
    gap, parted, logits = _gap(engine, off, on)
    assert margin == pytest.approx(gap, abs=1e-4)
    assert set(parted) <= set(mx.argsort(logits)[-2:].tolist())  # the two near-tied tokens
    assert _margin(engine, off, off) is None


def test_the_margin_where_the_model_did_not_waver_is_its_top_two_gap(tiny_model):
    engine = _engine(tiny_model)
    try:
        off = _reply(engine, OFF, "plain")
        other = " cache" if not off.startswith(" cache") else " model"
        margin = _margin(engine, off, other)
        gap, _, _ = _gap(engine, off, other)
    finally:
        engine.unload()
    assert margin is not None and margin > 1e-3 and margin == pytest.approx(gap, rel=1e-3)


def test_a_race_that_parts_reports_the_margin(near_tie, tmp_path):
    path = near_tie[0]
    server = ServerProcess(["--model", str(path)], tmp_path / "data")
    try:
        server.wait_ready()
        with WsClient(server.ws_url) as ws:
            set_settings(ws, reasoning_budget=0, max_tokens=16, draft_block_size=4)
            ws.send({"type": "race", "id": "near-tie", "text": PROMPT})
            summary, _ = ws.until("race_done", id="near-tie", timeout=300)
        receipt = requests.get(server.url + "/api/receipts/near-tie").json()["receipt"]
        markdown = requests.get(server.url + "/api/receipts/near-tie?format=markdown").text
    finally:
        server.stop()
    divergence = summary["first_divergence"]
    assert summary["identical"] is False and 0 <= divergence["margin"] < 1e-3
    assert receipt["first_divergence"] == divergence
    assert "a near-tie" in markdown and "both continuations are greedy" in markdown
