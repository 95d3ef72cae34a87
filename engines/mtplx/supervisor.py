"""Adopt a healthy MTPLX daemon, or start ``mtplx serve`` and stop it again; never orphan one.

A daemon this process started is stopped on unload, at interpreter exit
(atexit), and by the daemon itself when this process dies without cleaning up:
``MTPLX_APP_PARENT_PID`` makes ``mtplx serve`` keep a wrapper that stops the
server once that pid is gone. A daemon that was already running is only used.
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from ..errors import EngineError
from ..sse import as_text

log = logging.getLogger(__name__)
LOG_LINES = 40
EXPECTED_LOAD_S = 120.0  # a 9B model; only shapes the progress bar
Progress = Callable[[str, float | None], None]
_owned: set[MtplxSupervisor] = set()  # strong: a daemon is stopped at exit even if its engine was dropped


@atexit.register
def _stop_owned() -> None:
    for supervisor in list(_owned):
        supervisor.stop()


class MtplxSupervisor:
    def __init__(self, base_url: str, model: str | None = None, context_window: int | None = None,
                 kv_quant: str = "q8", depth: int = 3, api_key: str | None = None, executable: str = "mtplx",
                 start_timeout_s: float = 1800.0, grace_s: float = 10.0, download: bool = True,
                 may_start: bool = True):
        parts = urlsplit(base_url)
        self.base_url = base_url.rstrip("/")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 8766
        self.model = model
        self.context_window = context_window
        self.kv_quant = kv_quant
        self.depth = depth
        self.api_key = api_key
        self.executable = executable
        self.start_timeout_s = start_timeout_s
        self.grace_s = grace_s
        self.download = download  # mtplx serve may fetch a model that is not cached (--download)
        self.may_start = may_start  # else only a daemon already running at the address is used
        self.proc: subprocess.Popen | None = None
        self.health: dict = {}
        self._log: collections.deque[str] = collections.deque(maxlen=LOG_LINES)
        self._lock = threading.Lock()
        self._abort = threading.Event()  # stop() during a start: give up waiting for readiness
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(5.0))

    @property
    def owned(self) -> bool:
        return self.proc is not None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def probe(self) -> tuple[str, dict]:
        """("mtplx", health) for a healthy daemon, ("closed", {}) for a free port, ("other", {"what": ...})."""
        try:
            response = self._client.get(self.base_url + "/health")
        except (httpx.ConnectError, httpx.ConnectTimeout):
            return "closed", {}
        except httpx.HTTPError as exc:
            return "other", {"what": f"a server that did not answer /health ({type(exc).__name__})"}
        if response.status_code == 401:
            return "other", {"what": "an MTPLX daemon that refuses the API key", "code": "unauthorized"}
        try:
            health = response.json()
        except ValueError:
            health = None
        if response.status_code == 200 and isinstance(health, dict) and health.get("ok") is True:
            return "mtplx", health
        kind = response.headers.get("Content-Type", "no content type")
        return "other", {"what": f"something that is not MTPLX (GET /health gave HTTP {response.status_code}, {kind})"}

    def ensure(self, progress: Progress) -> dict:
        """A healthy daemon at the address, adopted or started; returns its /health."""
        with self._lock:
            state, detail = self.probe()
            if state == "mtplx":
                self.health = detail
                if not self.owned and self.model is None and isinstance(detail.get("model_path"), str):
                    self.model = detail["model_path"]  # so a replacement serves what the adopted one did
                return detail
            if state == "other":
                if detail.get("code") == "unauthorized":
                    raise EngineError(f"The MTPLX daemon at {self.address} refuses the API key. Pass the key it "
                                      "expects with --api-key, then restart specchat.", "unauthorized")
                raise EngineError(f"Port {self.port} on {self.host} is taken by {detail['what']}. Stop that program, "
                                  "or pass --base-url with another port for MTPLX.", "port_taken")
            if not self.may_start:
                raise EngineError(f"No MTPLX daemon answers at {self.address}, and specchat starts one only on this "
                                  "machine's loopback address (127.0.0.1). Start it there yourself, or pick a "
                                  "loopback address.", "unreachable")
            self._stop_locked()  # a daemon of ours that died: collect it before starting anew
            self._start(progress)
            return self.health

    def _command(self) -> list[str]:
        exe = shutil.which(self.executable)
        if exe is None:
            raise EngineError("The mtplx command was not found. Install MTPLX (pip install mtplx, on Apple Silicon), "
                              "start a daemon yourself at the --base-url address, or choose another engine.",
                              "mtplx_missing")
        command = [exe, "serve"]
        if self.model:
            command += ["--model", self.model, *(["--download"] if self.download else [])]
        command += ["--host", self.host, "--port", str(self.port)]
        if self.context_window:
            command += ["--context-window", str(self.context_window)]
        return command + ["--kv-quant", self.kv_quant, "--depth", str(self.depth)]

    def _start(self, progress: Progress) -> None:
        command = self._command()
        log.info("starting %s", " ".join(command))
        env = dict(os.environ, MTPLX_APP_PARENT_PID=str(os.getpid()), PYTHONUNBUFFERED="1")
        if self.api_key:
            env["MTPLX_API_KEY"] = self.api_key
        self._log.clear()
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace", env=env,
                                     start_new_session=True)  # its own group: stopping it reaches the wrapper's child
        _owned.add(self)
        threading.Thread(target=self._pump_log, args=(self.proc,), name="mtplx-log", daemon=True).start()
        started = time.monotonic()
        while True:
            elapsed = time.monotonic() - started
            code = self.proc.poll()
            if code is not None:
                time.sleep(0.1)  # let the log pump read the last lines
                tail = "\n".join(list(self._log)[-8:]) or "(no output)"
                self.proc = None
                raise EngineError(f"mtplx serve exited with code {code} while starting. Its last lines:\n{tail}",
                                  "daemon_exited")
            state, health = self.probe()
            if state == "mtplx":
                self.health = health
                log.info("MTPLX ready at %s after %.1f s", self.address, elapsed)
                return
            if self._abort.is_set():
                self._stop_locked()
                raise EngineError("MTPLX was stopped while it was starting.", "unloaded")
            if elapsed > self.start_timeout_s:
                self._stop_locked()
                raise EngineError(f"MTPLX did not become ready within {self.start_timeout_s:g} s, so it was "
                                  "stopped. See its log, then try again.", "start_timeout")
            last = self._log[-1] if self._log else ""
            progress(f"starting MTPLX ({elapsed:.0f} s){': ' + last[:120] if last else ''}",
                     min(0.95, 0.05 + elapsed / EXPECTED_LOAD_S))
            time.sleep(0.2)

    def _pump_log(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            line = line.rstrip()
            self._log.append(line)
            log.debug("mtplx: %s", line)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exited(self, within: float) -> bool:
        """True when the daemon we started has exited, or does so within ``within`` seconds."""
        proc = self.proc
        if proc is None:
            return False
        try:
            proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self) -> None:
        """Stop the daemon this supervisor started: SIGTERM, then SIGKILL after the grace period."""
        self._abort.set()
        with self._lock:
            self._stop_locked()
            self._abort.clear()

    def _stop_locked(self) -> None:
        proc, self.proc = self.proc, None
        _owned.discard(self)
        if proc is None:
            return
        if proc.poll() is None:
            log.info("stopping MTPLX (pid %d)", proc.pid)
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                log.warning("MTPLX ignored SIGTERM for %g s: killing it", self.grace_s)
                self._signal(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()

    @staticmethod
    def _signal(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass

    def post(self, path: str, timeout: float = 10.0) -> dict:
        """POST an admin or control route; raises EngineError when the daemon refuses or is gone."""
        try:
            response = self._client.post(self.base_url + path, timeout=timeout)
        except httpx.HTTPError as exc:
            raise EngineError(f"Cannot reach MTPLX at {self.address} ({type(exc).__name__}). Send a message to "
                              "start it again, then retry.", "unreachable") from exc
        if response.status_code != 200:
            raise EngineError(f"MTPLX refused {path} (HTTP {response.status_code}: {as_text(response.text)}).",
                              "server_error")
        try:
            return response.json()
        except ValueError:
            return {}

    def close(self) -> None:
        self.stop()
        self._client.close()
