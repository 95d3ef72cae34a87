"""The engine held by one race, sweep or calibration from start to end, and the calibration that gives way to a
message."""

from __future__ import annotations

import threading

from engines import Engine, EngineBusy, EngineError, GenerationOptions

from ..errors import ClientError
from ..measurement.baseline import Baselines, calibrate
from ..measurement.busy import CpuWatch
from engines.cancel import Relay

CALIBRATION_YIELD_S = 10.0  # how long a message waits for a calibration to stop at its next token


class ExclusiveUse:
    def __init__(self) -> None:
        # Held by a race, sweep or calibration from start to end: no other tab's reply runs between its lanes.
        self.lock = threading.Lock()
        self._calibration: Relay | None = None  # a running calibration's cancel: a message goes first
        # Taking the hold and naming the calibration are one step for a message: in between, a message would
        # find the engine held by something it cannot end.
        self._naming = threading.Lock()

    def calibrate(self, engine: Engine, options: GenerationOptions, baselines: Baselines) -> dict | None:
        """Measure and store the drafter-off rate with a short reply while the engine is idle. A message
        sent meanwhile ends it (``yield_calibration``), or holds the engine already when it starts: then None,
        and nothing is stored."""
        with self._naming:
            if not self.lock.acquire(blocking=False):
                raise ClientError("busy", "A race or calibration is running: wait for it to finish, then try again.",
                                  409)
            cancel = self._calibration = Relay()
        try:
            try:
                watch = CpuWatch()  # a calibration on a busy machine is flagged as a race's drafter-off lane is
                result = calibrate(engine, options, cancel)
                busy = watch.result()
            except EngineBusy:  # a message reached the engine before the measurement did: it went first
                return None
            except EngineError as exc:
                raise ClientError(exc.code, exc.message, 409) from None
        finally:
            with self._naming:
                self._calibration = None
                self.lock.release()
        if cancel.is_set():
            return None
        if result.error:
            raise ClientError(result.error["code"], f"Calibration failed: {result.error['message']}", 409)
        if result.stats.get("tok_s") is None:
            raise ClientError("too_short", "The calibration reply was too short to time: try again.", 409)
        return baselines.put(engine.info(), result.stats["tok_s"], "calibration",
                             prompt_tokens=result.stats.get("prompt_tokens"), busy=busy)

    def yield_calibration(self, wait_s: float = CALIBRATION_YIELD_S) -> bool:
        """End a running calibration so that a message goes first; whether the engine is free now
        (False when a race or sweep holds it)."""
        with self._naming:
            cancel = self._calibration
            if cancel is None:
                return not self.lock.locked()
            cancel.set()  # it stops at its next token
        if not self.lock.acquire(timeout=wait_s):
            return False
        self.lock.release()
        return True
