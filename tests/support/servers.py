"""specchat in this process: the app on a loopback port, in a thread, on any engine."""

from __future__ import annotations

import threading
from pathlib import Path

from engines.registry import EngineSpec, create_engine
from tests.support.harness import Addresses
from webapp import create_app
from webapp.cli import BASE_THREADS
from webapp.web.security import allowed_hosts
from webapp.web.serving import make_server


class LiveServer(Addresses):
    """The app on a loopback port in this process, stopped at teardown."""

    def __init__(self, engine, data_dir: Path):
        self.engine = engine
        self.app = create_app(engine, data_dir=data_dir, spec=EngineSpec(name="fake"),
                              engine_factory=create_engine)
        self.server = make_server(self.app, "127.0.0.1", 0,
                                  threads=BASE_THREADS + self.app.extensions["specchat"].api.limit)
        self.port = self.server.port
        self.app.config["ALLOWED_HOSTS"] = allowed_hosts("127.0.0.1", self.server.port)
        self.host = self.app.extensions["specchat"]
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        self.host.start_loading().join(timeout=30)

    def stop(self) -> None:
        self.host.cancel_all()
        self.server.stop()
        self.thread.join(timeout=10)
