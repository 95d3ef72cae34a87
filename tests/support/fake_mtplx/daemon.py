"""A fake MTPLX 2.12.2 daemon, written from the HTTP API reference, for tests on any OS.

``mtplx serve`` flags as the real parser takes them (unknown flags exit 2), the
port closed until the model is "loaded", ``/health``, ``/v1/models``, the SSE
stream (role chunk, keep-alive comments, progress and heartbeat frames,
reasoning then content deltas, the final chunk with ``usage``/``mtplx_stats``/
``timings``, ``[DONE]``), error chunks, HTTP errors, header sessions, cancel,
cache clear and SSD archive, SIGTERM, and the parent watch of
``MTPLX_APP_PARENT_PID``. Image parts (``image_url`` data URLs) are taken when
the model can see (FAKE_MTPLX_VISION=1, a model with its vision tower) and in
MTP mode, each counting ``IMAGE_TOKENS`` prompt tokens; refused as the real
daemon refuses them otherwise.

Tests steer it through ``POST /fake/next`` (faults for the next chat request)
and read what it saw from ``GET /fake/state``. Environment: FAKE_MTPLX_READY_S
(load time), FAKE_MTPLX_FAIL_START (exit during start-up with that message),
FAKE_MTPLX_IGNORE_TERM (ignore SIGTERM), FAKE_MTPLX_ARGV_LOG (append argv here).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KV_QUANT = {"off": "off", "q8": "q8", "q4": "q4", "8": "q8", "4": "q4", "int8": "q8", "int4": "q4"}
SESSION_HEADERS = ("X-MTPLX-Session-Id", "X-Session-Affinity", "X-Session-Id", "X-OpenWebUI-Chat-Id",
                   "X-OpenWebUI-User-Id")
EFFORTS = ("auto", "low", "medium", "high", "xhigh", "minimal", "none", "off", "disable", "disabled")
REASONING = ["The", " user", " says", " hi.", " I", " should", " greet.\n"]
ANSWER = ["Hello", "!", " How", " can", " I", " help", "?"]
IMAGE_TOKENS = 64  # prompt tokens per image (the real count follows the image's size)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="mtplx")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve")
    serve.add_argument("--model", default="Youssofal/Qwen3.8-27B-MTPLX-Optimized-Speed")
    serve.add_argument("--download", action="store_true")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--context-window", type=int)
    serve.add_argument("--kv-quant", "--paged-kv-quant", "--paged-kv-quantization", choices=sorted(KV_QUANT),
                       default="off")
    serve.add_argument("--depth", type=int, default=3)
    serve.add_argument("--api-key")
    serve.add_argument("--model-id")
    serve.add_argument("--yes", action="store_true")
    args = parser.parse_args(argv)
    if not 1 <= args.depth <= 3:
        parser.exit(2, f"error: --depth must be between 1 and 3 for this model (got {args.depth})\n")
    return args


class Daemon:
    def __init__(self, args: argparse.Namespace, argv: list[str]):
        self.args = args
        self.argv = argv
        self.model_id = args.model_id or "mtplx-" + args.model.rsplit("/", 1)[-1].lower().replace(".", "")
        self.api_key = args.api_key or os.environ.get("MTPLX_API_KEY")
        self.vision = os.environ.get("FAKE_MTPLX_VISION") == "1"  # the model has a vision tower
        self.lock = threading.Lock()
        self.faults: list[dict] = []
        self.requests: list[dict] = []
        self.cancels: list[str] = []
        self.disconnects: list[str] = []
        self.sessions: dict[str, int] = {}
        self.active: dict[str, str] = {}  # request id -> session id
        self.cancelled: set[str] = set()
        self.cache_clears = 0
        self.archives = 0

    def health(self) -> dict:
        return {
            "ok": True, "model": self.model_id, "model_path": self.args.model, "generation_mode": "mtp",
            "load_mtp": True, "mtp_enabled": True, "depth": self.args.depth,
            "context_window": self.args.context_window or 262144,
            "paged_kv_quantization": KV_QUANT[self.args.kv_quant], "active_requests": len(self.active),
            "startup": {"pid": os.getpid(), "model_id": self.model_id,
                        "app_parent_pid": os.environ.get("MTPLX_APP_PARENT_PID")},
        }

    def state(self) -> dict:
        with self.lock:
            return {"argv": self.argv, "pid": os.getpid(), "requests": self.requests, "cancels": self.cancels,
                    "disconnects": self.disconnects, "sessions": self.sessions, "cache_clears": self.cache_clears,
                    "archives": self.archives}


def error_body(status: int, message: str, code: str | None = None) -> dict:
    kinds = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 409: "conflict_error"}
    kind = kinds.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def image_bytes(url: str) -> bytes:
    """An image part's bytes, checked as the real daemon checks them (an http(s) URL, which it would fetch,
    stands for itself here)."""
    if url.startswith("data:"):
        header, _, payload = url.partition(",")
        if not payload or ";base64" not in header:
            raise ValueError("image data URL must be base64 encoded")
        return base64.b64decode(payload)
    if not url.startswith(("http://", "https://")):
        raise ValueError("image_url must be a data: URL or an http(s) URL")
    return url.encode()


def flatten_images(messages: list[dict]) -> tuple[list[dict], list[bytes]]:
    """Messages with their content's text parts joined, and the images in order (counted apart, as image tokens)."""
    images: list[bytes] = []
    flat = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            text = []
            for part in content:
                if isinstance(part, dict) and (part.get("type") == "image_url" or "image_url" in part):
                    url = part.get("image_url")
                    images.append(image_bytes(str((url.get("url") if isinstance(url, dict) else url) or "")))
                elif isinstance(part, dict):
                    text.append(str(part.get("text", "")))
            message = {**message, "content": "".join(text)}
        flat.append(message)
    return flat, images


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    daemon: Daemon

    def log_message(self, format, *args):
        sys.stdout.write("fake-mtplx: " + format % args + "\n")
        sys.stdout.flush()

    def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def _authorised(self) -> bool:
        key = self.daemon.api_key
        if not key or self.path.startswith("/fake/"):
            return True
        sent = self.headers.get("X-API-Key") or (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if sent == key:
            return True
        self._json(401, {"error": {"message": "missing or invalid API key", "type": "authentication_error"}},
                   {"WWW-Authenticate": "Bearer"})
        return False

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        if not self._authorised():
            return
        d = self.daemon
        if self.path == "/health":
            self._json(200, d.health())
        elif self.path.startswith("/v1/models"):
            window = d.args.context_window or 262144
            self._json(200, {"object": "list", "data": [{
                "id": d.model_id, "object": "model", "created": int(time.time()), "owned_by": "mtplx",
                "capability": "chat", "supports_vision": d.vision,
                "modalities": {"input": ["text", "image"] if d.vision else ["text"], "output": ["text"]},
                "context_length": window, "max_context_length": window, "max_model_len": window}]})
        elif self.path == "/fake/state":
            self._json(200, d.state())
        else:
            self._json(404, error_body(404, "Not Found", "HTTPException"))

    def do_POST(self):
        if not self._authorised():
            return
        d, path = self.daemon, self.path
        body = self._body()
        if path == "/fake/next":
            with d.lock:
                d.faults.append(body)
            self._json(200, {"ok": True})
        elif path == "/admin/cache/clear":
            with d.lock:
                cleared = len(d.sessions)
                d.sessions.clear()
                d.cache_clears += 1
            self._json(200, {"sessions_cleared": cleared, "bank_entries_cleared": cleared,
                             "quiesced": {"postcommits_aborted": 0, "ssd_writes_cancelled": 0,
                                          "cold_tier_flushed": False},
                             "mlx_cache_cleanup": {}, "peak_memory_reset": True})
        elif path == "/admin/cache/ssd/archive":
            with d.lock:
                d.archives += 1
            self._json(200, {"archived": True, "archive_path": f"/fake/ssd-archive-{int(time.time())}",
                             "active_dir": "/fake/ssd", "ram_cache_unchanged": True})
        elif path.startswith("/admin/sessions/") and path.endswith("/clear"):
            session = path[len("/admin/sessions/"):-len("/clear")]
            with d.lock:
                existed = d.sessions.pop(session, None) is not None
            self._json(200, {"session_id": session, "existed": existed, "bank_entries_cleared": int(existed)})
        elif path.startswith("/v1/mtplx/cancel/"):
            rid = path[len("/v1/mtplx/cancel/"):]
            with d.lock:
                d.cancels.append(rid)
                found = rid in d.active
                if found:
                    d.cancelled.add(rid)
            self._json(200, {"ok": True, "request_id": rid, "cancelled": found, "active_requests": len(d.active)})
        elif path == "/v1/chat/completions":
            self._chat(body)
        else:
            self._json(404, error_body(404, "Not Found", "HTTPException"))

    def _chat(self, body: dict) -> None:
        d = self.daemon
        with d.lock:
            fault = d.faults.pop(0) if d.faults else {}
            record = {"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body}
            d.requests.append(record)
        if "status" in fault:
            status = fault["status"]
            headers = {"Retry-After": "1"} if status in (429, 503) else {}
            return self._json(status, error_body(status, fault.get("message", "fault"), fault.get("code")), headers)
        messages = body.get("messages")
        if not messages:
            return self._json(400, error_body(400, "messages must not be empty"))
        if any("role" not in m for m in messages):
            return self._json(422, error_body(422, "body.messages.0.role: Field required",
                                              "request_validation_error"))
        mode = body.get("generation_mode") or "mtp"
        if mode not in ("mtp", "ar"):
            return self._json(400, error_body(400, "generation_mode must be 'mtp' or 'ar'"))
        depth = body.get("depth")
        if depth is not None and not (isinstance(depth, int) and 1 <= depth <= 3):
            return self._json(400, error_body(400, "draft depth must be between 1 and 3"))
        effort = body.get("reasoning_effort")
        if effort is not None and effort not in EFFORTS:
            return self._json(400, error_body(400, "reasoning_effort must be one of: auto, low, medium, high, xhigh"))
        try:
            messages, images = flatten_images(messages)
        except ValueError as exc:
            return self._json(400, error_body(400, str(exc), "HTTPException"))
        if images and not d.vision:
            return self._json(400, error_body(400, "this model has no vision tower; image content is not supported "
                                                   "for it", "HTTPException"))
        if images and mode == "ar":
            return self._json(400, error_body(400, "image content requires MTP generation mode", "HTTPException"))
        with d.lock:
            record["images"] = [hashlib.sha256(image).hexdigest() for image in images]  # what the tower would see
        session = next((self.headers[h] for h in SESSION_HEADERS if self.headers.get(h)), None)
        session = session or (body.get("metadata") or {}).get("session_id") or f"anon-{uuid.uuid4().hex[:16]}"
        with d.lock:
            if session in d.active.values():
                return self._json(409, error_body(409, f"session {session} is busy", "EngineSessionBusy"))
        rid = "chatcmpl-" + (self.headers.get("X-MTPLX-Request-Id") or uuid.uuid4().hex)
        thinking = body.get("enable_thinking")
        if thinking is None:
            thinking = (body.get("chat_template_kwargs") or {}).get("enable_thinking", True)
        prompt = (sum(len(str(m.get("content", "")).split()) for m in messages) + 4 * len(messages) +
                  IMAGE_TOKENS * len(images))
        if not body.get("stream"):
            return self._json(200, {
                "id": rid, "object": "chat.completion", "created": int(time.time()), "model": d.model_id,
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": "Hi"}}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}})
        with d.lock:
            d.active[rid] = session
        try:
            depth = (depth or d.args.depth) if mode == "mtp" else 0
            self._stream(rid, session, body, fault, bool(thinking), mode, depth, prompt)
        except (BrokenPipeError, ConnectionResetError):
            with d.lock:
                d.disconnects.append(rid)
        finally:
            with d.lock:
                d.active.pop(rid, None)
                d.cancelled.discard(rid)
            self.close_connection = True

    def _write(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _chunk(self, rid: str, delta: dict, finish=None, **extra) -> None:
        chunk = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
                 "model": self.daemon.model_id, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                 **extra}
        self._write("data: " + json.dumps(chunk) + "\n\n")

    def _stream(self, rid, session, body, fault, thinking, mode, depth, prompt) -> None:
        d = self.daemon
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self._chunk(rid, {"role": "assistant"})
        self._write(": keep-alive\n\n")
        style = fault.get("style", "reasoning_content")
        reasoning = fault.get("reasoning", REASONING) if thinking else []
        answer = fault.get("answer", ANSWER)
        if style == "inline":
            pieces = [("content", t) for t in (["<thi", "nk>"] * bool(reasoning) + reasoning +
                                               ["</th", "ink>"] * bool(reasoning) + answer)]
        else:
            pieces = [(style, t) for t in reasoning] + [("content", t) for t in answer]
        # Tool calls as MTPLX streams them when tools are declared: ``tool_calls`` deltas, each the list one delta
        # carries, after the content; the finish is then "tool_calls".
        calls = fault.get("tool_calls", []) if body.get("tools") else []
        pieces += [("tool_calls", piece) for piece in calls]
        limit = (None if fault.get("ignore_max_tokens") else body.get("max_tokens")) or len(pieces)
        finish = "length" if len(pieces) > limit else "tool_calls" if calls else "stop"
        pieces = pieces[:limit]
        token_s = fault.get("token_s", 0.002)
        cached = d.sessions.get(session, 0)
        start = time.monotonic()

        def by_depth(n: int) -> list[int]:
            return [n * (depth - k) // (depth + 1) for k in range(depth)]

        for i, (field, text) in enumerate(pieces):
            with d.lock:
                cancelled = rid in d.cancelled
            if cancelled:
                self._chunk(rid, {}, "error", error={
                    "message": f"request cancelled via /v1/mtplx/cancel after {i} streamed tokens",
                    "type": "server_error", "code": "CancelledError", "param": None})
                break
            if fault.get("die_after") == i:
                os._exit(3)
            if fault.get("error_after") == i:
                self._chunk(rid, {}, "error", error={"message": fault.get("message", "model owner made no progress "
                            "for 300s; request aborted by the stream stall watchdog"), "type": "server_error",
                            "code": fault.get("code", "TimeoutError"), "param": None})
                break
            if fault.get("stall_after") == i:
                time.sleep(fault.get("stall_s", 5))
            if fault.get("malformed_at") == i:
                self._write("data: {not json\n\n")
            if fault.get("heartbeat_at") == i:
                self._chunk(rid, {}, mtplx_progress={"heartbeat": True, "phase": "generating",
                                                     "completion_tokens": i, "elapsed_s": 11.0,
                                                     "seconds_since_last_token": 10.0})
            elapsed = max(time.monotonic() - start, 1e-3)
            self._chunk(rid, {}, mtplx_progress={
                "completion_tokens": i + 1, "decode_elapsed_s": elapsed,
                "decode_tok_s": None if i == 0 else round((i + 1) / elapsed, 2),
                "decode_phase": {"content": "answer", "tool_calls": "tool_call"}.get(field, "reasoning"),
                "phase_tok_s": 42.0, "request_id": rid, "session_id": session, "generated_tokens": i + 1,
                "accepted_by_depth": by_depth(i + 1), "drafted_by_depth": [i + 1] * depth,
                "verify_calls": (i + 1) if depth else 0})
            self._chunk(rid, {field: text})
            time.sleep(token_s)
        else:
            n_reasoning = sum(1 for f, _ in pieces if f not in ("content", "tool_calls"))
            n = len(pieces) + (0 < n_reasoning < len(pieces))  # the token that closed thinking counts too
            with d.lock:
                d.sessions[session] = prompt + n
            accepted, drafted = by_depth(n), [n] * depth
            self._chunk(rid, {}, finish, usage={
                "prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": n_reasoning},
            }, mtplx_stats={
                "generation_mode": mode, "prompt_tokens": prompt, "completion_tokens": n, "finish_reason": finish,
                "ttft_s": 0.041, "decode_tok_s": 52.3, "tok_s": 52.3, "accepted_drafts": sum(accepted),
                "drafted_tokens": sum(drafted), "verify_calls": n if depth else 0, "accepted_by_depth": accepted,
                "drafted_by_depth": drafted, "cached_tokens": cached, "session_id": session, "mtp_depth": depth,
                "reasoning_tokens": n_reasoning,
            }, timings={"prompt_n": prompt, "predicted_n": n, "prompt_ms": 35.0, "predicted_ms": 100.0,
                        "predicted_per_second": 50.1, "draft_n": sum(drafted), "draft_n_accepted": sum(accepted)})
        self._write("data: [DONE]\n\n")
        self._write("")


def watch_parent(parent: int) -> None:
    """Exit once the app that started us is gone, as the real wrapper does."""
    while True:
        time.sleep(0.2)
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            os._exit(0)
        if os.getppid() != parent:
            os._exit(0)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if os.environ.get("FAKE_MTPLX_ARGV_LOG"):
        with open(os.environ["FAKE_MTPLX_ARGV_LOG"], "a") as log:
            log.write(json.dumps(argv) + "\n")
    print(f"MTPLX 2.12.2 (fake): serving {args.model} on {args.host}:{args.port}", flush=True)
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((args.host, args.port))
    except OSError:
        print(f"error: port {args.port} is already in use", file=sys.stderr, flush=True)
        return 2
    finally:
        probe.close()
    if os.environ.get("MTPLX_APP_PARENT_PID"):
        threading.Thread(target=watch_parent, args=(int(os.environ["MTPLX_APP_PARENT_PID"]),), daemon=True).start()
    print("loading model weights", flush=True)
    time.sleep(float(os.environ.get("FAKE_MTPLX_READY_S", "0.3")))
    if os.environ.get("FAKE_MTPLX_FAIL_START"):
        print(f"error: {os.environ['FAKE_MTPLX_FAIL_START']}", file=sys.stderr, flush=True)
        return 1
    Handler.daemon = Daemon(args, argv)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, signal.SIG_IGN if os.environ.get("FAKE_MTPLX_IGNORE_TERM") else stop)
    print("MTPLX is ready.", flush=True)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    print("fake-mtplx: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
