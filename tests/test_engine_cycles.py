"""Switching MLX → another engine → MLX again and again leaves nothing behind in the server process."""

import signal

from tests.support.harness import WsClient

SMALL = {"max_tokens": 8, "reasoning_budget": 8}


def until_settled(ws: WsClient) -> dict:
    """The engine frames after a switch, up to the new engine's ready (or error)."""
    while True:
        frame, seen = ws.until("engine", timeout=120)
        errors = [f for f in seen if f["type"] == "error"]
        assert not errors, errors
        if frame["engine"]["state"] in ("ready", "error"):
            return frame


def cycle(ws: WsClient, model: str, n: int) -> None:
    ws.send({"type": "switch_engine", "spec": {"name": "fake"}})
    assert until_settled(ws)["engine"]["state"] == "ready"
    ws.send({"type": "switch_engine", "spec": {"name": "mlx", "model": model}})
    assert until_settled(ws)["engine"]["state"] == "ready"
    ws.send({"type": "new_chat"})
    ws.until("new_chat")
    done, _ = ws.chat(f"c{n}")
    assert done["finish_reason"] in ("stop", "length"), done


def test_engine_cycles_keep_threads_flat_and_exit_clean(start_server, tiny_model):
    model = str(tiny_model)
    server = start_server("--model", model, "--models-dir", str(tiny_model.parent))
    server.wait_ready()
    with WsClient(server.ws_url) as ws:
        ws.send({"type": "settings", "values": SMALL})
        ws.until("settings")
        cycle(ws, model, 0)  # the first cycle starts what every later one reuses
        threads = server.threads()
        for n in range(1, 5):
            cycle(ws, model, n)
        # Each cycle used to leave MLX's native stream thread of a fresh model thread behind (+2 a cycle).
        assert server.threads() <= threads + 1, (threads, server.threads())
    server.proc.send_signal(signal.SIGTERM)
    assert server.stop() == 0
    log = "".join(server.lines)
    assert "Traceback" not in log and "terminate called" not in log, log[-3000:]
