"""The OpenAI-compatible API on real models through the official ``openai`` library: the tiny model's reply
streamed and not (the same greedy text, its thinking apart, the drafter's numbers in ``timings``), and an image
on the tiny vision checkpoint."""

import base64
import io

import openai
import pytest
from PIL import Image

from tests.support.harness import ServerProcess

pytestmark = pytest.mark.slow


def connect(server) -> tuple[openai.OpenAI, str]:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    return client, client.models.list().data[0].id


def test_streamed_and_not_give_the_same_greedy_reply(mlx_server, tiny_model):
    client, model = connect(mlx_server)
    assert model == str(tiny_model)
    # The random tiny model ends at once without the system prompt the page sends.
    asked = dict(model=model, max_tokens=24, messages=[
        {"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "hello"}],
                temperature=0, extra_body={"reasoning_budget": 8, "speculative": True, "draft_block_size": 3})
    whole = client.chat.completions.create(**asked)
    chunks = list(client.chat.completions.create(**asked, stream=True, stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    streamed = "".join(d.content or "" for d in deltas)
    thought = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    message = whole.choices[0].message
    assert streamed == message.content and thought == message.model_extra.get("reasoning_content", "")
    assert whole.usage.completion_tokens == chunks[-1].usage.completion_tokens > 0
    assert 0 < whole.usage.completion_tokens_details.reasoning_tokens <= 8  # thinking, held to the budget
    timings = whole.model_extra["timings"]
    assert timings["draft_n"] > 0 and timings["draft_n_accepted"] <= timings["draft_n"]
    assert len(timings["acceptance_by_depth"]) == 2
    assert timings["prompt_n"] == whole.usage.prompt_tokens - whole.usage.prompt_tokens_details.cached_tokens


def test_an_image_on_a_model_that_can_see(vision_model, tmp_path):
    server = ServerProcess(["--model", str(vision_model)], tmp_path / "data")
    try:
        server.wait_ready()
        client, model = connect(server)
        assert client.models.list().data[0].model_extra["vision"] is True
        out = io.BytesIO()
        Image.new("RGB", (64, 64), (200, 10, 10)).save(out, format="PNG")
        url = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()
        text_only = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
            {"role": "user", "content": "What is this?"}], extra_body={"reasoning_budget": 0})
        seen = client.chat.completions.create(model=model, max_tokens=4, temperature=0, messages=[
            {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}],
            extra_body={"reasoning_budget": 0})
        assert seen.choices[0].finish_reason in ("stop", "length")
        assert seen.usage.prompt_tokens > text_only.usage.prompt_tokens  # the image's tokens were prefilled
    finally:
        server.stop()
