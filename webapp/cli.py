"""``specchat`` / ``python -m webapp``: check the arguments, open the port, load, serve."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

log = logging.getLogger("specchat")


def default_data_dir() -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "specchat"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "specchat"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="specchat", description="Chat with a local model in your browser.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8765, help="port to serve on (default 8765; 0 picks a free one)")
    parser.add_argument("--model", help="model folder or hub id (default: the bundled demo model)")
    parser.add_argument(
        "--drafter",
        help="drafter folder or hub id, or 'none' (default: the model's bundled MTP head when it has one)",
    )
    parser.add_argument("--data-dir", type=Path, default=None, help=f"settings and state (default {default_data_dir()})")
    parser.add_argument(
        "--engine", choices=["mlx", "fake"], default="mlx",
        help="mlx: the model in this process; fake: a scripted engine for UI work",
    )
    parser.add_argument(
        "--blas", default=None,
        help="Linux CPU: auto (OpenBLAS when installed, the default), bundled (the mlx wheel's own), or a library path",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    return parser.parse_args(argv)


def build_engine(args: argparse.Namespace, data_dir: Path):
    if args.engine == "fake":
        from engines.fake import FakeEngine

        return FakeEngine()
    from engines.mlx import MlxEngine
    from engines.mlx.loading import check_model_dir

    if args.model is None:
        from demo_model import default_model

        args.model = str(default_model(data_dir))
    check_model_dir(args.model)
    if args.drafter not in (None, "none"):
        check_model_dir(args.drafter)
    return MlxEngine(args.model, args.drafter)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    data_dir = (args.data_dir or default_data_dir()).expanduser()
    from engines import ModelNotFound

    try:
        engine = build_engine(args, data_dir)
    except ModelNotFound as exc:
        print(f"specchat: {exc.message}", file=sys.stderr)
        return 2
    if args.engine == "mlx":  # arguments are valid: now settle the BLAS before MLX does real work
        from .blas import blas_in_use, ensure_fast_blas

        ensure_fast_blas(args.blas, argv)
        import mlx.core  # noqa: F401  (maps the BLAS library, so the log below can name it)

        log.info("BLAS: %s", blas_in_use())

    from . import create_app
    from .security import allowed_hosts
    from .serving import make_server

    app = create_app(engine, data_dir=data_dir)
    try:
        server = make_server(app, args.host, args.port)
    except OSError as exc:
        print(f"specchat: cannot listen on {args.host}:{args.port} ({exc}). Pick another --port.", file=sys.stderr)
        return 2
    app.config["ALLOWED_HOSTS"] = allowed_hosts(args.host, server.port)
    host = app.extensions["specchat"]

    def shut_down(signum, _frame):
        log.info("%s: stopping", signal.Signals(signum).name)
        host.cancel_all()
        server.stop()

    signal.signal(signal.SIGINT, shut_down)
    signal.signal(signal.SIGTERM, shut_down)
    host.start_loading()
    print(f"specchat: open http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{server.port}/ "
          f"(model {engine.info().model}; data in {data_dir})", flush=True)
    server.run()
    engine.unload()
    log.info("stopped")
    return 0
