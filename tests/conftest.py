import threading
from pathlib import Path

import pytest

from benchmarks.harness import Addresses, ServerProcess
from engines.fake import FakeEngine
from engines.registry import EngineSpec, create_engine
from webapp import create_app
from webapp.web.security import allowed_hosts
from webapp.web.serving import make_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A real qwen3_5 checkpoint with a bundled MTP head (random weights), built in about a second."""
    from demo_model.tiny import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("models") / "tiny-qwen3_5")


HF_BASE = "tinyorg/Tiny-Qwen3.5"  # the hub id the hf_base fixture's checkpoint is cached under


@pytest.fixture(scope="session")
def hf_base(tmp_path_factory) -> tuple[Path, Path]:
    """(folder, hub cache): a float Qwen 3.5 checkpoint (bfloat16) in Hugging Face layout, with its MTP head
    in its own indexed shard, and a hub cache holding it as HF_BASE."""
    from demo_model.hf_layout import add_to_hub_cache, build_hf_checkpoint

    root = tmp_path_factory.mktemp("hf")
    hf = build_hf_checkpoint(root / "Tiny-Qwen3.5")
    add_to_hub_cache(hf, root / "hub", HF_BASE)
    return hf, root / "hub"


@pytest.fixture(scope="session")
def converted(hf_base, tmp_path_factory) -> tuple[Path, Path]:
    """(headless, split): ``mlx_vlm.convert -q --q-bits 4 --q-group-size 64`` of HF_BASE by its hub id,
    without --mtp (its card names HF_BASE as base_model, as a hub conversion's does), and of the folder with
    --mtp (the head written beside it, as Tiny-4bit-split-mtp)."""
    from demo_model.hf_layout import convert

    hf, cache = hf_base
    root = tmp_path_factory.mktemp("converted")
    headless = convert(HF_BASE, root / "Tiny-4bit", bits=4, group_size=64, hub_cache=cache)
    split = convert(hf, root / "Tiny-4bit-split", bits=4, group_size=64, mtp=True)
    return headless, split


class LiveServer(Addresses):
    """The app on a loopback port in this process, stopped at teardown."""

    def __init__(self, engine, data_dir: Path):
        self.engine = engine
        self.app = create_app(engine, data_dir=data_dir, spec=EngineSpec(name="fake"),
                              engine_factory=create_engine)
        self.server = make_server(self.app, "127.0.0.1", 0)
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


@pytest.fixture
def fake_server(tmp_path):
    server = LiveServer(FakeEngine(delay_s=0.01), tmp_path / "data")
    yield server
    server.stop()


@pytest.fixture
def start_server(tmp_path):
    """Start real servers on the CLI; each is stopped at teardown."""
    started: list[ServerProcess] = []

    def start(*args: str, data_dir: Path | None = None) -> ServerProcess:
        server = ServerProcess(list(args), data_dir or tmp_path / "data")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def mlx_server(tiny_model, tmp_path_factory):
    """One real server on the tiny model, shared by a module's tests."""
    server = ServerProcess(["--model", str(tiny_model)], tmp_path_factory.mktemp("data"))
    server.wait_ready()
    yield server
    server.stop()
