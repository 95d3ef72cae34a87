"""The app's engine, its settings and the open tabs, bound to the app with init_app.

EngineHost is the one object the routes and sockets use; each job lives in its own module: the engine's
lifecycle (engine_lifecycle.py), the tabs and broadcast (tabs.py), and the exclusive hold with calibration
(exclusive.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from engines import Engine
from engines.registry import NAMES, EngineSpec, TabPolicy

from ..conversations.conversation import Conversations
from ..conversations.store import Store
from ..measurement.baseline import Baselines
from ..measurement.busy import CpuWatch
from ..measurement.receipts import Receipts
from ..openai_api.queue import DEFAULT_API_QUEUE, ApiQueue
from .engine_lifecycle import EngineLifecycle
from .exclusive import CALIBRATION_YIELD_S, ExclusiveUse
from .settings import SettingsStore
from .tabs import Tab, Tabs


class EngineHost:
    def __init__(
        self,
        engine: Engine,
        settings: SettingsStore,
        receipts: Receipts,
        baselines: Baselines,
        spec: EngineSpec | None = None,
        factory: Callable[[EngineSpec], Engine] | None = None,
        store: Store | None = None,
        policy: TabPolicy | None = None,
        api_queue: int = DEFAULT_API_QUEUE,
    ):
        self._lifecycle = EngineLifecycle(engine, settings, spec, factory, policy)
        self._tabs = Tabs()
        self._exclusive = ExclusiveUse()
        self.settings = settings
        self.receipts = receipts
        self.baselines = baselines
        self.exclusive = self._exclusive.lock  # held by a race, sweep or calibration from start to end
        self.store = store or Store(None)
        self.tools = None  # the app's ToolBox (webapp/tools/), which offers the model its tools
        self.conversations = Conversations(lambda: self.engine, self.store, CpuWatch, lambda: self.tools)
        # Held from a settings change to its broadcast: crossing changes reach the engine and the tabs in the
        # order they were applied, so both end with the settings held.
        self._settings_lock = threading.Lock()
        # Held from reading the engine's state to queuing its frame: the tabs get engine frames in the order
        # their states were read, so none is older than the one before it.
        self._engine_frames = threading.Lock()
        self.api = ApiQueue(api_queue, self.broadcast_engine)  # the OpenAI-compatible API's requests
        self._watch(engine)

    @property
    def engine(self) -> Engine:
        return self._lifecycle.engine

    @property
    def spec(self) -> EngineSpec:
        return self._lifecycle.spec

    @property
    def policy(self) -> TabPolicy:
        return self._lifecycle.policy

    @property
    def _sessions(self) -> set[Tab]:
        return self._tabs.sessions

    def init_app(self, app) -> None:
        app.extensions["specchat"] = self

    def _watch(self, engine: Engine) -> None:
        engine.on_change(lambda info: self._engine_changed(engine))

    def engine_frame(self) -> dict:
        info = self.engine.info()
        return {"type": "engine", "engine": info.to_dict(), "spec": self.spec.public(),
                "choices": list(NAMES) if self._lifecycle.factory else [self.spec.name],
                "deep_reset": self.engine.supports_deep_reset, "baseline": self.baselines.get(info),
                "api": self.api.state()}

    def calibrate(self) -> dict | None:
        """Measure and store the drafter-off rate with a short reply while the engine is idle. A message
        sent meanwhile ends it (``yield_calibration``): then None, and nothing is stored."""
        baseline = self._exclusive.calibrate(self.engine, self.settings.current, self.baselines)
        if baseline is not None:
            self.broadcast_engine()
        return baseline

    def yield_calibration(self, wait_s: float = CALIBRATION_YIELD_S) -> bool:
        """End a running calibration so that a message goes first; whether the engine is free now
        (False when a race or sweep holds it)."""
        return self._exclusive.yield_calibration(wait_s)

    def start_loading(self) -> threading.Thread:
        """Load in the background: the port is open and the UI shows progress meanwhile."""
        return self._lifecycle.start_loading()

    def switch_engine(self, values: dict) -> None:
        """Replace the engine: the old one's resources are released, then the new one loads."""
        engine, spec = self._lifecycle.new_engine(values)
        self.cancel_all()
        self._watch(engine)
        self._lifecycle.replace(engine, spec, lambda: self._engine_changed(engine))

    def join(self, session: Tab) -> None:
        """Add a tab and greet it. Its hello reads the engine's state and the settings, and is queued, under the
        locks their broadcasts hold: a change made meanwhile reaches the tab after its hello, never before it
        (where the hello's older state would then stand)."""
        with self._settings_lock, self._engine_frames:
            self._tabs.add(session)
            session.hello()

    def remove(self, session: Tab) -> None:
        self._tabs.remove(session)

    def broadcast(self, frame: dict) -> None:
        self._tabs.broadcast(frame)

    def update_settings(self, values: dict) -> dict:
        with self._settings_lock:
            options = self.settings.update(values)
            self.engine.prepare(options)
            full = options.model_dump()
            self.broadcast({"type": "settings", "values": full})
        return full

    def close(self) -> None:
        """Shutdown's first half, before the sockets close: refuse new replies and switches, stop every
        reply and wait until each sent its ``done``, and until each tab's queued frames are on its socket."""
        self._lifecycle.refuse_switches()
        self.conversations.close()
        self._tabs.flush(2)

    def shut_down(self) -> None:
        """Shutdown's second half: wait for a load or hand-over in flight, then unload the engine in use.

        Every engine is unloaded exactly once: a replaced one by its hand-over, the last one here.
        """
        self.close()
        self._lifecycle.unload_last()

    def cancel_all(self) -> None:
        """Stop every reply and wait until each got its ``done`` frame."""
        conversations = self.conversations.all()
        for conversation in conversations:
            conversation.cancel()
        for conversation in conversations:
            conversation.cancel(wait=True)

    def broadcast_engine(self) -> None:
        """Send every tab the engine's state, read and queued under ``_engine_frames``."""
        with self._engine_frames:
            self.broadcast(self.engine_frame())

    def _engine_changed(self, engine: Engine) -> None:
        with self._engine_frames:
            if engine is self.engine:  # a replaced engine's last words (unloading) must not reach the tabs
                self.broadcast(self.engine_frame())
