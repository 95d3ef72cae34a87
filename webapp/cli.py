"""``specchat`` / ``python -m webapp``: check the arguments, open the port, load, serve.

``specchat bench …`` measures decode speed from a terminal instead (see bench.py); ``specchat drafter …``
finds or builds the MTP head of a checkpoint converted without it (drafter_command.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import secrets
import signal
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from engines.registry import MTPLX_URL, is_loopback

from .arguments import default_data_dir, hub_id
from .blas import blas_argument

log = logging.getLogger("specchat")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# The server's worker threads for pages, REST and websockets' starts; each queued API request holds one more, so
# a full API queue never leaves the page waiting.
BASE_THREADS = 4
# The commands main() hands the rest of the line to, as --help lists them.
COMMANDS = {
    "bench": "decode speed with the drafter off and at each draft block, from a terminal",
    "drafter": "find or build the MTP head of a checkpoint converted without it",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and status 2, no usage dump
        self.exit(2, f"specchat: {message}\n")


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: pass 1 to 65535, or 0 for a free one")
    return value


def log_level(text: str) -> str:
    if text.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a log level: pass {', '.join(LOG_LEVELS)}")
    return text.upper()


def api_queue(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r}: pass 1 to 64 requests")
    return int(text)


def check_token(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Off loopback a token is required; one goes in a URL and a cookie, so it must be URL-safe."""
    if args.token is not None and not re.fullmatch(r"[A-Za-z0-9._~-]{8,}", args.token):
        parser.error(f"--token (or $SPECCHAT_TOKEN) must be at least 8 letters, digits, '-', '_', '.' or '~', "
                     f"e.g. --token {secrets.token_urlsafe(24)}")
    if args.token is None and not is_loopback(args.host):
        parser.error(f"--host {args.host} lets other machines in: pass --token TOKEN (or set SPECCHAT_TOKEN), "
                     f"e.g. --token {secrets.token_urlsafe(24)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    commands = "\n".join(f"  {name:<9} {words}" for name, words in COMMANDS.items())
    parser = _Parser(prog="specchat", description="Chat with a local model in your browser.",
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     epilog=f"commands (specchat COMMAND --help for their options):\n{commands}")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=port, default=8765, help="port to serve on (default 8765; 0 picks a free one)")
    parser.add_argument(
        "--model",
        help="mlx: model folder or hub id (default: the bundled demo model); mtplx: the model `mtplx serve` loads "
        "(default: whatever the daemon serves); openai: the served model name (default: the server's first)",
    )
    parser.add_argument(
        "--drafter",
        help="drafter folder or hub id, or 'none' (default: the model's bundled MTP head when it has one)",
    )
    parser.add_argument("--drafter-from", type=hub_id, default=None,
                        help="the Hugging Face checkpoint the model was converted from, whose MTP head becomes the "
                        "drafter when the model has none (default: the model's base_model)")
    parser.add_argument("--data-dir", type=Path, default=None, help=f"settings and state (default {default_data_dir()})")
    parser.add_argument("--models-dir", type=Path, default=None,
                        help="a folder of model folders the engine picker lists (default: the data folder's models/)")
    parser.add_argument("--mcp-config", type=Path, default=None,
                        help="the MCP servers file, in the mcpServers format (default: the data folder's mcp.json)")
    parser.add_argument(
        "--engine", choices=["mlx", "mtplx", "openai", "fake"], default="mlx",
        help="mlx: the model in this process; mtplx: a local MTPLX daemon (adopted, or started and stopped with "
        "specchat); openai: any OpenAI-compatible server; fake: a scripted engine for UI work",
    )
    parser.add_argument(
        "--base-url",
        help=f"openai: the server's /v1 URL (e.g. http://127.0.0.1:8080/v1); mtplx: the daemon's address "
        f"(default {MTPLX_URL})",
    )
    parser.add_argument("--api-key", default=os.environ.get("SPECCHAT_API_KEY"),
                        help="API key for the openai or mtplx server (default: $SPECCHAT_API_KEY)")
    parser.add_argument(
        "--blas", type=blas_argument, default=os.environ.get("SPECCHAT_BLAS"),  # checked like the flag
        help="Linux CPU: auto (OpenBLAS when installed, the default), bundled (the mlx wheel's own), or a library path "
        "(default: $SPECCHAT_BLAS or auto)",
    )
    parser.add_argument(
        "--token", default=os.environ.get("SPECCHAT_TOKEN") or None,
        help="access token every request must carry (default: $SPECCHAT_TOKEN); required off loopback",
    )
    parser.add_argument("--allow-remote-engines", action="store_true",
                        help="let the settings pane switch to servers off this machine's loopback address")
    parser.add_argument("--allow-downloads", action="store_true",
                        help="let the settings pane name hub models that are not on this machine (downloaded)")
    parser.add_argument("--api-queue", type=api_queue, default=8,
                        help="OpenAI-compatible API (/v1): how many requests may queue for the model, the one being "
                        "answered counted; more get 429 (default 8)")
    parser.add_argument("--api-store", action="store_true",
                        help="keep the OpenAI-compatible API's requests and replies in the conversation history")
    parser.add_argument("--log-level", type=log_level, default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    args = parser.parse_args(argv)
    if args.engine == "openai" and not args.base_url:
        parser.error("--engine openai needs --base-url, the server's /v1 URL (e.g. http://127.0.0.1:8080/v1)")
    check_token(parser, args)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:
        from .measurement.bench import main as bench

        return bench(argv[1:])
    if argv[:1] == ["drafter"]:
        from .drafter_command import main as drafter

        return drafter(argv[1:])
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    data_dir = (args.data_dir or default_data_dir()).expanduser()
    models_dir = args.models_dir.expanduser() if args.models_dir else None
    from engines import EngineError
    from engines.mlx.drafter_search import DrafterSearch
    from engines.registry import EngineSpec, create_engine

    spec = EngineSpec(name=args.engine, model=args.model, drafter=args.drafter, base_url=args.base_url,
                      api_key=args.api_key)
    # Where the MLX engine looks for the head of a checkpoint converted without it (and stores one it builds);
    # --drafter-from names --model's base, not that of a model a tab switches to.
    drafters = DrafterSearch(data_dir=data_dir, models_dir=models_dir or data_dir / "models",
                             allow_downloads=args.allow_downloads, base_model=args.drafter_from)
    factory = partial(create_engine, drafters=replace(drafters, base_model=None))
    try:
        engine = create_engine(spec, drafters=drafters)
    except EngineError as exc:
        print(f"specchat: {exc.message}", file=sys.stderr)
        return 2
    # The arguments are valid: settle the BLAS before MLX does real work (also for a later live
    # switch to the MLX engine).
    from .blas import blas_in_use, ensure_fast_blas
    from .precision import float32_products, keep_float32_exact

    keep_float32_exact()
    ensure_fast_blas(args.blas, argv)
    if args.engine == "mlx":
        import mlx.core  # noqa: F401  (maps the BLAS library, so the log below can name it)

        log.info("BLAS: %s", blas_in_use())
        log.info("float32 products: %s", float32_products())

    from . import create_app
    from .conversations.store import StoreError
    from .web.security import allowed_hosts
    from .web.serving import make_server

    try:
        app = create_app(engine, data_dir=data_dir, spec=spec, engine_factory=factory,
                         config={"ACCESS_TOKEN": args.token,
                                 "MODELS_DIR": models_dir,
                                 "ALLOW_REMOTE_ENGINES": args.allow_remote_engines,
                                 "ALLOW_DOWNLOADS": args.allow_downloads,
                                 "API_QUEUE": args.api_queue, "API_STORE": args.api_store,
                                 "MCP_CONFIG": args.mcp_config})
    except StoreError as exc:
        print(f"specchat: {exc}", file=sys.stderr)
        return 2
    try:
        server = make_server(app, args.host, args.port, threads=BASE_THREADS + args.api_queue)
    except OSError as exc:
        print(f"specchat: cannot listen on {args.host}:{args.port} ({exc}). Pick another --port.", file=sys.stderr)
        app.extensions["tools"].close()
        return 2
    app.config["ALLOWED_HOSTS"] = allowed_hosts(args.host, server.port)
    host = app.extensions["specchat"]

    def shut_down(signum, _frame):
        log.info("%s: stopping", signal.Signals(signum).name)
        host.close()  # every reply's done goes out before the sockets close
        server.stop()

    signal.signal(signal.SIGINT, shut_down)
    signal.signal(signal.SIGTERM, shut_down)
    host.start_loading()
    address = "127.0.0.1" if args.host in ("0.0.0.0", "::") else f"[{args.host}]" if ":" in args.host else args.host
    login = f"?token={args.token}" if args.token else ""
    print(f"specchat: open http://{address}:{server.port}/{login} "
          f"(model {engine.info().model}; data in {data_dir})", flush=True)
    server.run()
    host.shut_down()  # the engine in use now, which a tab may have switched
    app.extensions["tools"].close()  # the MCP servers, each within its bounded shutdown
    log.info("stopped")
    return 0
