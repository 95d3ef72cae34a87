"""The MLX engine's settings hand-off around an unload: what was queued before it, or sent while it waits for the
model thread, prepares nothing and fails nothing; an engine loaded again prepares again."""

import threading
import time

from engines import GenerationOptions
from engines.mlx.engine import MlxEngine


def test_settings_changes_around_an_unload_prepare_nothing(tiny_model, caplog, monkeypatch):
    engine = MlxEngine(str(tiny_model))
    engine.load(GenerationOptions())
    prepared = []
    monkeypatch.setattr(engine, "_prepare", lambda options: prepared.append(options.system_prompt))
    gate = threading.Event()
    engine._thread.submit(gate.wait)  # the model thread is busy: what follows queues behind it
    try:
        engine.prepare(GenerationOptions(system_prompt="Queued before the unload."))
        unloading = threading.Thread(target=engine.unload)
        with caplog.at_level("ERROR", logger="engines.mlx.engine"):
            unloading.start()
            deadline = time.monotonic() + 10
            while not engine._unloading and time.monotonic() < deadline:
                time.sleep(0.01)
            assert engine._unloading
            engine.prepare(GenerationOptions(system_prompt="Sent while the unload waits."))
            gate.set()
            unloading.join(30)
            assert not unloading.is_alive()
            engine._thread.submit(lambda: None).result()  # every queued job has run
    finally:
        gate.set()
    assert prepared == []
    assert engine.info().message == "unloaded"
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.records


def test_an_engine_loaded_again_after_an_unload_prepares_again(tiny_model):
    engine = MlxEngine(str(tiny_model))
    options = GenerationOptions(system_prompt="Be brief.")
    engine.load(options)
    engine.unload()
    engine.load(options)
    try:
        assert engine.info().state == "ready"
        assert engine._prefix is not None and engine._primed_system == "Be brief."  # warmed up for the settings
    finally:
        engine.unload()
