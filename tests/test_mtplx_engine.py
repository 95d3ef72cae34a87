"""The MTPLX engine and its supervisor, driving a fake ``mtplx`` executable on PATH."""

import logging
import os
import subprocess
import sys
import threading
import time

import pytest
import requests

from engines import Answer, GenerationOptions, Stats, Thinking
from engines.mtplx import MtplxEngine
from engines.mtplx.engine import effort_for
from tests.support.engine_runs import run, text, turn
from tests.support.fake_mtplx import DAEMON, FakeDaemon, control, free_port, install_mtplx, pid_alive
from tests.support.peers import HtmlHandler, serving
from tests.support.poll import wait_until
from tests.support.wsclient import WsClient, texts

MODEL = "org/Qwen3.8-9B-Distill-MTPLX-Q6G64"
OPTIONS = GenerationOptions(reasoning_budget=64, max_tokens=64, draft_block_size=3)


@pytest.fixture(scope="module")
def fake_path(tmp_path_factory):
    bin_dir = tmp_path_factory.mktemp("bin")
    install_mtplx(bin_dir)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        mp.setenv("FAKE_MTPLX_READY_S", "0.4")
        yield bin_dir


def new_engine(**kwargs) -> MtplxEngine:
    kwargs.setdefault("base_url", f"http://127.0.0.1:{free_port()}")
    return MtplxEngine(model=kwargs.pop("model", MODEL), grace_s=kwargs.pop("grace_s", 3.0), **kwargs)


@pytest.fixture(scope="module")
def started(fake_path):
    engine = new_engine(context_window=8192)
    infos = []
    engine.on_change(infos.append)
    engine.load(OPTIONS)
    yield engine, infos
    engine.unload()


def daemon_state(engine) -> dict:
    return control(engine.supervisor.base_url, "/fake/state")


def last_request(engine) -> dict:
    return daemon_state(engine)["requests"][-1]


def test_starts_mtplx_serve_with_the_reference_flags(started):
    engine, infos = started
    port = engine.supervisor.port
    assert daemon_state(engine)["argv"] == [
        "serve", "--model", MODEL, "--download", "--host", "127.0.0.1", "--port", str(port),
        "--context-window", "8192", "--kv-quant", "q8", "--depth", "3",
    ]
    loading = [i for i in infos if i.state == "starting" and i.message.startswith("starting MTPLX")]
    assert loading and all(0 < i.progress < 1 for i in loading)
    assert "loading model weights" in loading[-1].message  # the daemon's last log line is shown
    info = engine.info()
    assert (info.name, info.state, info.model, info.drafter) == ("mtplx", "ready", MODEL, "MTP head (MTPLX)")
    health = requests.get(engine.supervisor.base_url + "/health", timeout=5).json()
    assert health["startup"]["app_parent_pid"] == str(os.getpid())


def test_warm_up_sends_the_system_prompt(started):
    engine, _ = started
    warm = daemon_state(engine)["requests"][0]["body"]
    assert warm["stream"] is False and warm["max_tokens"] == 1
    assert warm["messages"][0] == {"role": "system", "content": OPTIONS.system_prompt}


def test_reply_with_sessions_drafting_effort_and_stats(started):
    engine, _ = started
    conversation = f"conv-{time.monotonic_ns()}"
    done, events = run(engine, turn(options=OPTIONS, conversation=conversation))
    assert text(events, Thinking) == "The user says hi. I should greet.\n"
    assert text(events, Answer) == "Hello! How can I help?"
    request = last_request(engine)
    headers, body = request["headers"], request["body"]
    assert headers["x-mtplx-session-id"] == conversation
    assert headers["x-mtplx-request-id"].startswith("specchat-")
    assert "x-mtplx-client" not in headers and "session_id" not in body
    assert (body["generation_mode"], body["depth"], body["reasoning_effort"]) == ("mtp", 2, "low")
    assert body["enable_thinking"] is True and "thinking_budget" not in body
    stats = done.stats
    assert (stats["ttft_ms"], stats["tok_s"], stats["cached_tokens"], stats["prefill_ms"]) == (41.0, 52.3, 0, 35.0)
    assert (stats["thinking_tokens"], stats["answer_tokens"], stats["tokens"]) == (7, 7, 14)
    # 15 tokens generated (</think> too): 15 verify rounds, 10 kept a first draft, 5 of them a second too.
    assert (stats["drafted"], stats["accepted"]) == (30, 15)
    assert stats["acceptance"] == 0.5
    assert stats["acceptance_by_depth"] == [round(10 / 15, 4), round(5 / 15, 4)]
    assert (stats["rounds"], stats["mean_accepted"], stats["accepted_hist"]) == (15, 1.0, [5, 5, 5])
    second, _ = run(engine, turn(options=OPTIONS, conversation=conversation))
    assert second.stats["cached_tokens"] == stats["prompt_tokens"] + stats["tokens"] + 1


def test_live_stats_come_from_progress_frames(started):
    engine, _ = started
    control(engine.supervisor.base_url, "/fake/next", {"token_s": 0.03, "reasoning": [" step"] * 20})
    _, events = run(engine, turn(options=OPTIONS))
    live = [e.values for e in events if isinstance(e, Stats)]
    # The last may come with the final chunk, whose mtplx_stats give the daemon's final rate instead.
    assert live[:-1] and all(v["acceptance_by_depth"] and v["tok_s"] == 42.0 for v in live[:-1])
    assert all(v["rounds"] and sum(v["accepted_hist"]) == v["rounds"] for v in live)
    assert all(v["tokens"] == v["thinking_tokens"] + v["answer_tokens"] for v in live)


def test_drafting_off_and_depth_clamped(started):
    engine, _ = started
    done, _ = run(engine, turn(options=OPTIONS.updated({"speculative": False})))
    body = last_request(engine)["body"]
    assert body["generation_mode"] == "ar" and "depth" not in body
    assert done.stats["drafted"] is None and done.stats["acceptance"] is None
    assert done.stats["acceptance_by_depth"] is None
    assert (done.stats["rounds"], done.stats["mean_accepted"], done.stats["accepted_hist"]) == (None, None, None)
    run(engine, turn(options=OPTIONS.updated({"draft_block_size": 9})))
    assert last_request(engine)["body"]["depth"] == 3
    done, _ = run(engine, turn(options=OPTIONS.updated({"draft_block_size": "auto"})))
    body = last_request(engine)["body"]
    assert body["generation_mode"] == "mtp" and "depth" not in body  # auto: the daemon drafts at its own depth
    assert done.stats["block_history"] is None  # the daemon does not say which depths ran


@pytest.mark.parametrize("budget,levels,effort", [
    (0, ("low", "medium", "xhigh"), None),
    (300, ("low", "medium", "xhigh"), "low"),
    (1024, ("low", "medium", "xhigh"), "medium"),
    (2048, ("low", "medium", "xhigh"), "xhigh"),
    (9000, ("low", "medium", "xhigh"), "xhigh"),
    (300, ("medium", "xhigh"), "medium"),
    (2048, ("low", "medium", "high"), "high"),
    (1024, (), None),
])
def test_budget_steps_map_to_declared_effort_levels(budget, levels, effort):
    assert effort_for(budget, levels) == effort


def test_no_effort_for_a_family_without_levels(fake_path):
    daemon = FakeDaemon("--model", "org/Qwen3.5-9B-MTPLX")
    engine = MtplxEngine(daemon.url, model=None, context_window=None)
    try:
        engine.load(OPTIONS)
        assert engine.info().model == "mtplx-qwen35-9b-mtplx"
        run(engine)
        body = daemon.state()["requests"][-1]["body"]
        assert body["enable_thinking"] is True and "reasoning_effort" not in body
        run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 0})))
        body = daemon.state()["requests"][-1]["body"]
        assert body["enable_thinking"] is False and "reasoning_effort" not in body
    finally:
        engine.unload()
        daemon.stop()


def test_stop_cancels_on_the_daemon(started):
    engine, _ = started
    control(engine.supervisor.base_url, "/fake/next", {"token_s": 0.05, "reasoning": [" step"] * 200})

    def stop(t, event):
        if isinstance(event, Thinking):
            t.cancel.set()

    done, _ = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 1000})), stop)
    assert done.finish_reason == "cancelled"
    request_id = last_request(engine)["headers"]["x-mtplx-request-id"]
    assert daemon_state(engine)["cancels"][-1] == f"chatcmpl-{request_id}"
    # The daemon ends the cancelled request at its next token; until then the session is busy (409).
    health = engine.supervisor.base_url + "/health"
    assert wait_until(lambda: requests.get(health, timeout=5).json()["active_requests"] == 0, timeout=5)
    assert run(engine)[0].finish_reason == "stop"


def test_a_session_still_busy_from_the_last_reply_is_tried_again(started):
    # The daemon frees a session after writing the last chunk, so a message sent at once may meet a 409.
    engine, _ = started
    sent = len(daemon_state(engine)["requests"])
    control(engine.supervisor.base_url, "/fake/next", {"status": 409, "message": "session c1 is busy",
                                                         "code": "EngineSessionBusy"})
    done, events = run(engine)
    assert done.finish_reason == "stop" and text(events, Answer)
    assert len(daemon_state(engine)["requests"]) == sent + 2


def test_cache_reset_and_deep_reset(started):
    engine, _ = started
    run(engine, turn(conversation="to-clear"))
    before = daemon_state(engine)
    freed = engine.reset_cache()
    after = daemon_state(engine)
    assert freed["entries"] == 2 * len(before["sessions"]) > 0 and freed["bytes"] == 0
    assert after["cache_clears"] == before["cache_clears"] + 1 and after["sessions"] == {}
    deep = engine.reset_cache(deep=True)
    assert deep["ssd_archive"].startswith("/fake/ssd-archive-")
    assert daemon_state(engine)["archives"] == before["archives"] + 1
    # The archive stays on disk: the tab is told where, and that deleting it frees the space.
    assert f"moved its SSD cache to {deep['ssd_archive']}, where it still takes disk space" in deep["message"]


def test_a_failed_warm_up_is_logged_and_tried_again(started, caplog):
    engine, _ = started
    options = OPTIONS.updated({"system_prompt": "Be brief."})

    def warm_ups() -> list:
        return [r["body"] for r in daemon_state(engine)["requests"] if r["body"].get("stream") is False]

    control(engine.supervisor.base_url, "/fake/next", {"status": 500, "message": "warm-up broke"})
    with caplog.at_level(logging.WARNING, logger="engines.mtplx.engine"):
        engine.prepare(options)
        wait_until(lambda: "warm-up failed" in caplog.text)
    assert "HTTP 500 (warm-up broke)" in caplog.text
    tried = len(warm_ups())
    engine.prepare(options)  # not counted as warmed: the next settings change tries again
    wait_until(lambda: len(warm_ups()) > tried)
    assert warm_ups()[-1]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_forget_clears_the_conversation_session(started):
    engine, _ = started
    run(engine, turn(conversation="forget-me"))
    assert "forget-me" in daemon_state(engine)["sessions"]
    engine.forget("forget-me")
    assert wait_until(lambda: "forget-me" not in daemon_state(engine)["sessions"], timeout=5)


def test_daemon_dies_mid_stream_and_is_restarted_on_the_next_message(fake_path):
    engine = new_engine()
    try:
        engine.load(OPTIONS)
        first_pid = engine.supervisor.proc.pid
        control(engine.supervisor.base_url, "/fake/next", {"die_after": 3})
        done, events = run(engine)
        assert (done.finish_reason, done.error_code) == ("error", "connection_lost")
        assert done.error_message == "MTPLX stopped during the reply. It will be started again with your next message."
        assert text(events, Thinking) == "The user says"
        done, events = run(engine)
        assert done.finish_reason == "stop" and text(events, Answer) == "Hello! How can I help?"
        assert engine.supervisor.proc.pid != first_pid and engine.info().state == "ready"
    finally:
        engine.unload()


def test_adopts_a_running_daemon_and_leaves_it_running(fake_path):
    daemon = FakeDaemon("--model", MODEL)
    engine = MtplxEngine(daemon.url, model=MODEL)
    try:
        engine.load(OPTIONS)
        assert engine.info().state == "ready" and "already running" in engine.info().message
        assert not engine.supervisor.owned
        assert run(engine)[0].finish_reason == "stop"
        engine.unload()
        assert daemon.proc.poll() is None
        assert requests.get(daemon.url + "/health", timeout=5).json()["ok"] is True
    finally:
        daemon.stop()


def test_mtplx_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    engine = new_engine()
    engine.load(OPTIONS)
    assert engine.info().state == "error"
    assert "mtplx command was not found" in engine.info().message
    done, _ = run(engine)  # the next message tries again and says the same
    assert done.error_code == "mtplx_missing"
    engine.unload()


def test_daemon_exits_during_start_up_shows_its_last_lines(fake_path, monkeypatch):
    monkeypatch.setenv("FAKE_MTPLX_FAIL_START", "model cannot run with MTPLX")
    engine = new_engine()
    engine.load(OPTIONS)
    info = engine.info()
    assert info.state == "error"
    assert "mtplx serve exited with code 1 while starting" in info.message
    assert "loading model weights" in info.message and "error: model cannot run with MTPLX" in info.message
    engine.unload()


def test_port_taken_by_something_that_is_not_mtplx(fake_path):
    with serving(HtmlHandler) as url:
        engine = new_engine(base_url=url)
        engine.load(OPTIONS)
        port = engine.supervisor.port
        assert engine.info().state == "error"
        assert f"Port {port} on 127.0.0.1 is taken by something that is not MTPLX" in engine.info().message
        assert not engine.supervisor.owned
        engine.unload()


def test_a_daemon_that_ignores_sigterm_is_killed_after_the_grace_period(fake_path, monkeypatch):
    monkeypatch.setenv("FAKE_MTPLX_IGNORE_TERM", "1")
    engine = new_engine(grace_s=0.25)
    engine.load(OPTIONS)
    pid = engine.supervisor.proc.pid
    started = time.monotonic()
    engine.unload()
    # Killed once this grace ran out (ten times over, and still far short of the default grace of 10 s).
    assert not pid_alive(pid) and time.monotonic() - started < 3


def test_cli_chat_then_sigterm_stops_the_daemon(fake_path, start_server):
    port = free_port()
    server = start_server("--engine", "mtplx", "--base-url", f"http://127.0.0.1:{port}", "--model", MODEL)
    assert server.wait_ready(timeout=30)["name"] == "mtplx"
    pid = requests.get(f"http://127.0.0.1:{port}/health", timeout=5).json()["startup"]["pid"]
    with WsClient(server.ws_url) as ws:
        done, frames = ws.chat("m1")
        assert texts(frames, "thinking") == "The user says hi. I should greet.\n"
        assert texts(frames, "answer") == "Hello! How can I help?"
        assert done["stats"]["acceptance_by_depth"] and done["stats"]["drafted"] > 0
        control(f"http://127.0.0.1:{port}", "/fake/next", {"die_after": 2})
        done, frames = ws.chat("m2")
        assert done["finish_reason"] == "error" and done["error"]["code"] == "connection_lost"
        assert done["error"]["message"] == ("MTPLX stopped during the reply. It will be started again with your "
                                            "next message.")
        done, frames = ws.chat("m3")
        assert done["finish_reason"] == "stop" and texts(frames, "answer") == "Hello! How can I help?"
        health = requests.get(f"http://127.0.0.1:{port}/health", timeout=5).json()
        assert health["startup"]["pid"] != pid
        history = [m["body"]["messages"] for m in control(f"http://127.0.0.1:{port}", "/fake/state")["requests"]]
        # The conversation is intact; the failed reply is stored as seen but not sent as a complete reply.
        assert [m["content"] for m in history[-1]][1:] == ["hello", "Hello! How can I help?", "hello", "hello"]
        pid = health["startup"]["pid"]
    assert server.stop() == 0
    assert wait_until(lambda: not pid_alive(pid), timeout=5)


def test_specchat_killed_outright_does_not_orphan_the_daemon(fake_path, start_server):
    port = free_port()
    server = start_server("--engine", "mtplx", "--base-url", f"http://127.0.0.1:{port}", "--model", MODEL)
    server.wait_ready(timeout=30)
    pid = requests.get(f"http://127.0.0.1:{port}/health", timeout=5).json()["startup"]["pid"]
    server.proc.kill()
    server.proc.wait(timeout=10)
    assert wait_until(lambda: not pid_alive(pid), timeout=5)


def test_unload_while_starting_stops_the_daemon_at_once(fake_path, monkeypatch):
    monkeypatch.setenv("FAKE_MTPLX_READY_S", "30")
    engine = new_engine()
    loader = threading.Thread(target=engine.load, args=(OPTIONS,), daemon=True)
    loader.start()
    wait_until(lambda: engine.supervisor.proc is not None)
    pid = engine.supervisor.proc.pid
    started = time.monotonic()
    engine.unload()
    loader.join(timeout=5)
    assert not loader.is_alive() and time.monotonic() - started < 5
    assert not pid_alive(pid)


def test_the_fake_refuses_flags_the_real_parser_does_not_know():
    """The fake's `serve` parser follows the reference, so the supervisor's flags are checked against it."""
    result = subprocess.run([sys.executable, str(DAEMON), "serve", "--kv-bits", "8"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2 and "unrecognized arguments: --kv-bits 8" in result.stderr
    result = subprocess.run([sys.executable, str(DAEMON), "serve", "--depth", "4"], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2 and "--depth must be between 1 and 3" in result.stderr


def test_an_adopted_daemon_that_died_is_replaced_serving_the_same_model(fake_path):
    daemon = FakeDaemon("--model", MODEL)
    engine = MtplxEngine(daemon.url)
    try:
        engine.load(OPTIONS)
        assert not engine.supervisor.owned
        daemon.stop()
        done, events = run(engine)
        assert done.finish_reason == "stop" and text(events, Answer) == "Hello! How can I help?"
        assert engine.supervisor.owned and engine.info().message == "MTPLX was restarted"
        argv = daemon_state(engine)["argv"]
        assert argv[argv.index("--model") + 1] == MODEL
        pid = engine.supervisor.proc.pid
        engine.unload()
        assert not pid_alive(pid)
    finally:
        engine.unload()
        daemon.stop()


def test_a_daemon_with_another_api_key(fake_path):
    daemon = FakeDaemon("--model", MODEL, env={"MTPLX_API_KEY": "right"})
    try:
        wrong = MtplxEngine(daemon.url, api_key="wrong")
        wrong.load(OPTIONS)
        assert wrong.info().state == "error"
        assert "refuses the API key" in wrong.info().message and "--api-key" in wrong.info().message
        assert not wrong.supervisor.owned
        wrong.unload()
        right = MtplxEngine(daemon.url, api_key="right")
        right.load(OPTIONS)
        assert right.info().state == "ready" and run(right)[0].finish_reason == "stop"
        right.unload()
    finally:
        daemon.stop()


def test_switch_live_to_mtplx_deep_reset_then_back_stops_the_daemon(fake_path, start_server):
    port = free_port()
    server = start_server("--engine", "fake", "--allow-downloads")  # MODEL is a hub id not on this machine
    server.wait_ready()
    with WsClient(server.ws_url) as ws:
        assert ws.hello["deep_reset"] is False
        ws.send({"type": "switch_engine",
                 "spec": {"name": "mtplx", "base_url": f"http://127.0.0.1:{port}", "model": MODEL}})
        frame, _ = ws.until("engine")
        while frame["engine"]["state"] != "ready":
            frame, _ = ws.until("engine", timeout=60)
        assert frame["engine"]["name"] == "mtplx" and frame["deep_reset"] is True
        assert frame["spec"] == {"name": "mtplx", "model": MODEL, "drafter": None,
                                 "base_url": f"http://127.0.0.1:{port}", "api_key_set": False}
        pid = requests.get(f"http://127.0.0.1:{port}/health", timeout=5).json()["startup"]["pid"]
        done, frames = ws.chat("m1")
        assert texts(frames, "answer") == "Hello! How can I help?"
        ws.send({"type": "reset_cache", "deep": True})
        freed = ws.until("cache_reset")[0]["freed"]
        assert freed["ssd_archive"].startswith("/fake/ssd-archive-")
        ws.send({"type": "switch_engine", "spec": {"name": "fake"}})
        frame, _ = ws.until("engine")
        while frame["engine"]["state"] != "ready":
            frame, _ = ws.until("engine", timeout=60)
        assert frame["engine"]["name"] == "fake"
    assert wait_until(lambda: not pid_alive(pid), timeout=20)


def test_thinking_is_cut_at_the_budget_and_answered_on_the_same_session(started):
    engine, _ = started
    control(engine.supervisor.base_url, "/fake/next", {"reasoning": [f" step {n}." for n in range(40)]})
    before = len(daemon_state(engine)["requests"])
    done, events = run(engine, turn(options=OPTIONS.updated({"reasoning_budget": 4, "max_tokens": 64})))
    assert (done.finish_reason, done.error_code) == ("stop", None)
    assert "".join(e.text for e in events if isinstance(e, Thinking)) == " step 0. step 1. step 2. step 3."
    assert "".join(e.text for e in events if isinstance(e, Answer)) == "Hello! How can I help?"
    stats = done.stats
    assert (stats["budget_bound"], stats["thinking_tokens"], stats["answer_tokens"], stats["tokens"]) == (
        "cut", 4, 7, 11)
    # Both requests' drafting: the cut one's 5 tokens (its progress frames), then the answer request's 7.
    assert (stats["drafted"], stats["rounds"]) == (5 * 2 + 7 * 2, 12)
    cut, answer = daemon_state(engine)["requests"][before:]
    assert cut["headers"]["x-mtplx-session-id"] == answer["headers"]["x-mtplx-session-id"] == "c1"
    assert cut["body"]["enable_thinking"] is True and answer["body"]["enable_thinking"] is False
    assert answer["body"]["messages"][-1] == {
        "role": "assistant", "content": "<think>\nstep 0. step 1. step 2. step 3.\n</think>\n\n"}
    assert "reasoning_effort" not in answer["body"] and answer["body"]["max_tokens"] == 64
