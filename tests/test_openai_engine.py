"""The OpenAI-compatible engine against the fake MTPLX daemon (an OpenAI-compatible server) and bad servers."""

import time

import pytest

from engines import Answer, Stats, Thinking
from engines.openai_compat import OpenAICompatEngine
from tests.support.engine_runs import OPTIONS, run, text, turn
from tests.support.fake_mtplx import FakeDaemon, free_port
from tests.support.peers import HtmlHandler, serving
from tests.support.poll import wait_until

@pytest.fixture(scope="module")
def daemon():
    server = FakeDaemon("--model", "org/Qwen3.5-9B-MTPLX")
    yield server
    server.stop()


@pytest.fixture
def engine(daemon):
    engine = OpenAICompatEngine(daemon.url + "/v1", stall_s=1.0)
    engine.load(OPTIONS)
    yield engine
    engine.unload()


def assert_next_turn_works(engine):
    done, events = run(engine)
    assert done.finish_reason == "stop", done
    assert text(events, Answer) == "Hello! How can I help?"


def test_load_picks_the_served_model(engine):
    info = engine.info()
    assert (info.name, info.state, info.model) == ("openai", "ready", "mtplx-qwen35-9b-mtplx")


def test_thinking_then_answer_with_server_stats(engine, daemon):
    done, events = run(engine)
    assert text(events, Thinking) == "The user says hi. I should greet.\n"
    assert text(events, Answer) == "Hello! How can I help?"
    kinds = [type(e) for e in events if isinstance(e, (Thinking, Answer))]
    assert kinds.index(Answer) > max(i for i, k in enumerate(kinds) if k is Thinking)
    stats = done.stats
    assert (stats["thinking_tokens"], stats["answer_tokens"], stats["tokens"]) == (7, 7, 14)
    assert stats["tok_s"] == 50.1 and stats["drafted"] > 0 and 0 < stats["acceptance"] <= 1
    assert stats["prefill_ms"] == 35.0  # the server's timings.prompt_ms
    body = daemon.state()["requests"][-1]["body"]
    assert body["messages"][0] == {"role": "system", "content": OPTIONS.system_prompt}
    assert body["enable_thinking"] is True and body["chat_template_kwargs"] == {"enable_thinking": True}
    # The budget less the two tokens mlx-vlm writes past it; max_tokens counts thinking and its close too.
    assert body["max_tokens"] == 129 and body["thinking_budget"] == 62 and body["temperature"] == 0.0
    assert stats["budget_bound"] == "none"  # the model ended its thinking before the budget


def test_thinking_off_is_sent(engine, daemon):
    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 0})))
    assert text(events, Thinking) == "" and text(events, Answer) == "Hello! How can I help?"
    body = daemon.state()["requests"][-1]["body"]
    assert body["enable_thinking"] is False and "thinking_budget" not in body


@pytest.mark.parametrize("style", ["reasoning", "inline"])
def test_reasoning_field_and_inline_tags_become_thinking(engine, daemon, style):
    daemon.next(style=style)
    done, events = run(engine)
    assert text(events, Thinking) == "The user says hi. I should greet.\n"
    assert text(events, Answer) == "Hello! How can I help?"
    assert "<th" not in text(events, Answer) + text(events, Thinking)


def test_malformed_lines_are_skipped_and_counted(engine, daemon):
    daemon.next(malformed_at=3, heartbeat_at=5)
    done, events = run(engine)
    assert done.finish_reason == "stop"
    assert text(events, Answer) == "Hello! How can I help?"
    assert done.stats["skipped_lines"] == 1


def test_live_stats_at_most_ten_a_second(engine, daemon):
    daemon.next(token_s=0.03, reasoning=[" step"] * 30)
    started = time.monotonic()
    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 100})))
    live = [e for e in events if isinstance(e, Stats)]
    assert 1 <= len(live) <= (time.monotonic() - started) * 10 + 1
    assert all(e.values["tokens"] > 0 for e in live)


@pytest.mark.parametrize("status,code,says", [
    (400, "bad_request", "rejected the request (bad thing)"),
    (401, "unauthorized", "refused the API key"),
    (409, "conflict", "still busy with a reply"),
    (422, "invalid_request", "could not read the request"),
    (429, "rate_limited", "Wait 1 s"),
    (503, "unavailable", "busy or still starting"),
    (507, "insufficient_memory", "Start a new chat"),
])
def test_http_errors_before_streaming(engine, daemon, status, code, says):
    daemon.next(status=status, message="bad thing")
    done, _ = run(engine)
    assert (done.finish_reason, done.error_code) == ("error", code)
    assert says in done.error_message and "bad thing" in done.error_message
    assert_next_turn_works(engine)


def test_error_chunk_after_streaming_began(engine, daemon):
    daemon.next(error_after=4, message="model owner made no progress for 300s")
    done, events = run(engine)
    assert (done.finish_reason, done.error_code) == ("error", "server_error")
    assert "model owner made no progress for 300s" in done.error_message
    assert text(events, Thinking) == "The user says hi."
    assert_next_turn_works(engine)


def test_stall_ends_the_turn(daemon):
    engine = OpenAICompatEngine(daemon.url + "/v1", stall_s=0.25)
    engine.load(OPTIONS)
    try:
        daemon.next(stall_after=3, stall_s=3)
        started = time.monotonic()
        done, _ = run(engine)
        assert (done.finish_reason, done.error_code) == ("error", "stalled")
        assert "sent nothing for 0.25 s" in done.error_message
        # Ended by the stall limit, long before the server went on: ten times the limit, a tenth of the stall.
        assert time.monotonic() - started < 2.5
        time.sleep(3)  # the fake finishes its stalled reply before the next one
        assert_next_turn_works(engine)
    finally:
        engine.unload()


def test_stop_closes_the_stream_within_a_chunk(engine, daemon):
    chunk_s = 0.1
    daemon.next(token_s=chunk_s, reasoning=[" step"] * 200)
    stopped = {}

    def stop_on_third(t, event):
        if isinstance(event, Thinking) and "at" not in stopped:
            stopped["at"] = time.monotonic()
            t.cancel.set()

    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 1000})), stop_on_third)
    assert done.finish_reason == "cancelled"
    # Within a chunk, with ten chunks' slack; the rest of the reply would take two hundred.
    assert time.monotonic() - stopped["at"] < 10 * chunk_s
    assert wait_until(lambda: daemon.state()["disconnects"], timeout=5), "the server should see the client leave"
    assert_next_turn_works(engine)


@pytest.mark.parametrize("max_tokens, answer, tokens, finish", [(64, "Hello! How can I help?", 7, "stop"),
                                                               (4, "Hello! How can", 4, "length")])
def test_thinking_past_the_budget_is_cut_and_the_answer_asked_for(engine, daemon, max_tokens, answer, tokens, finish):
    daemon.next(reasoning=[" step"] * 60)
    before = len(daemon.state()["requests"])
    options = OPTIONS.updated({"reasoning_budget": 20, "max_tokens": max_tokens})
    done, events = run(engine, turn(options=options))
    assert text(events, Thinking) == " step" * 20 and text(events, Answer) == answer
    assert (done.finish_reason, done.error_code) == (finish, None)
    stats = done.stats
    assert (stats["budget_bound"], stats["thinking_tokens"], stats["answer_tokens"]) == ("cut", 20, tokens)
    assert stats["tokens"] == 20 + tokens
    cut, answer_request = (r["body"] for r in daemon.state()["requests"][before:])
    assert cut["enable_thinking"] is True and cut["max_tokens"] == max_tokens + 21
    assert answer_request["messages"][:-1] == cut["messages"]
    assert answer_request["messages"][-1] == {"role": "assistant",
                                              "content": "<think>\n" + ("step" + " step" * 19) + "\n</think>\n\n"}
    assert answer_request["enable_thinking"] is False and answer_request["chat_template_kwargs"] == {
        "enable_thinking": False}
    assert answer_request["max_tokens"] == max_tokens and "thinking_budget" not in answer_request
    assert answer_request["continue_final_message"] is True and answer_request["add_generation_prompt"] is False
    assert_next_turn_works(engine)


def test_a_server_that_closes_thinking_at_the_budget_is_its_bound(engine, daemon):
    daemon.next(reasoning=[" step"] * 20)
    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 20})))
    assert done.finish_reason == "stop" and done.stats["budget_bound"] == "server"
    assert text(events, Answer) == "Hello! How can I help?"


@pytest.mark.parametrize("budget", [0, 64])
def test_max_tokens_bounds_an_answer_the_server_runs_on_with(engine, daemon, budget):
    daemon.next(reasoning=[" hm"], ignore_max_tokens=True)
    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": budget, "max_tokens": 3})))
    assert text(events, Answer) == "Hello! How"
    assert done.finish_reason == "length" and done.stats["answer_tokens"] == 3
    assert_next_turn_works(engine)


def test_a_server_that_refuses_the_budget_is_cut_instead(daemon):
    engine = OpenAICompatEngine(daemon.url + "/v1", stall_s=1.0)
    engine.load(OPTIONS)
    try:
        # mlx-vlm's words when it drafts, sent as an error chunk before any token.
        daemon.next(error_after=0, message="thinking_budget is not supported with speculative decoding in the server.")
        daemon.next(reasoning=[" step"] * 30)
        before = len(daemon.state()["requests"])
        done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 10})))
        assert (done.finish_reason, done.stats["budget_bound"]) == ("stop", "cut")
        assert text(events, Thinking) == " step" * 10 and text(events, Answer) == "Hello! How can I help?"
        refused, cut, _ = (r["body"] for r in daemon.state()["requests"][before:])
        assert refused["thinking_budget"] == 8 and "thinking_budget" not in cut
        run(engine)
        assert "thinking_budget" not in daemon.state()["requests"][-1]["body"]
    finally:
        engine.unload()


def test_stop_during_the_answer_request(engine, daemon):
    daemon.next(reasoning=[" step"] * 30)
    daemon.next(token_s=0.05, answer=[" word"] * 100)

    def stop_in_answer(t, event):
        if isinstance(event, Answer):
            t.cancel.set()

    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 10})), stop_in_answer)
    assert done.finish_reason == "cancelled" and done.stats["budget_bound"] == "cut"
    assert_next_turn_works(engine)


def test_repeating_reasoning_line_is_cut(engine, daemon):
    daemon.next(reasoning=["Let me check the sum again.\n"] * 20)
    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 1000})))
    assert (done.finish_reason, done.error_code) == ("error", "repetition")
    assert "Let me check the sum again." in done.error_message
    assert text(events, Thinking).count("Let me check") == 6
    assert_next_turn_works(engine)


def test_second_stream_while_one_runs_is_refused(engine, daemon):
    daemon.next(token_s=0.05)
    first = engine.stream(turn())
    next(first)
    from engines import EngineBusy

    with pytest.raises(EngineBusy):
        engine.stream(turn())
    first.close()
    assert_next_turn_works(engine)


def test_reset_cache_says_the_server_keeps_its_cache(engine):
    freed = engine.reset_cache()
    assert (freed["prompt_tokens"], freed["entries"], freed["bytes"]) == (0, 0, 0)
    assert "cannot be reset" in freed["message"]


def test_wrong_api_key():
    daemon = FakeDaemon(env={"MTPLX_API_KEY": "right"})
    try:
        wrong = OpenAICompatEngine(daemon.url + "/v1", api_key="wrong")
        wrong.load(OPTIONS)
        assert wrong.info().state == "error"
        assert "refused the API key" in wrong.info().message and "--api-key" in wrong.info().message
        right = OpenAICompatEngine(daemon.url + "/v1", api_key="right")
        right.load(OPTIONS)
        assert right.info().state == "ready"
        assert_next_turn_works(right)
        wrong.unload()
        right.unload()
    finally:
        daemon.stop()


def test_connection_refused_is_explained_and_the_next_message_retries():
    port = free_port()
    engine = OpenAICompatEngine(f"http://127.0.0.1:{port}/v1")
    engine.load(OPTIONS)
    assert engine.info().state == "error"
    assert "Cannot reach" in engine.info().message and "--base-url" in engine.info().message
    done, _ = run(engine)
    assert done.error_code == "unreachable"
    daemon = FakeDaemon(port=port)
    try:
        assert_next_turn_works(engine)
        assert engine.info().state == "ready"
    finally:
        engine.unload()
        daemon.stop()


class HtmlChatHandler(HtmlHandler):
    """Lists models, then answers the chat with HTML."""

    def do_GET(self):
        self._send(b'{"object": "list", "data": [{"id": "m"}]}', "application/json")


def test_a_server_that_is_not_openai_compatible():
    with serving(HtmlHandler) as url:
        engine = OpenAICompatEngine(url + "/v1", model="m")
        engine.load(OPTIONS)
        assert engine.info().state == "error"
        assert "does not look OpenAI-compatible" in engine.info().message
        done, _ = run(engine)
        assert done.error_code == "not_openai"
        engine.unload()
    with serving(HtmlChatHandler) as url:
        engine = OpenAICompatEngine(url + "/v1")
        engine.load(OPTIONS)
        assert engine.info().state == "ready"
        done, _ = run(engine)
        assert done.error_code == "not_openai" and "text/html, not an event stream" in done.error_message
        engine.unload()
