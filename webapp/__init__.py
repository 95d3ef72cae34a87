"""specchat's web app: an application factory; nothing happens at import time."""

from __future__ import annotations

from pathlib import Path

from flask import Flask

ROOT = Path(__file__).resolve().parent.parent


def page_folder(name: str) -> Path:
    """The page's ``static`` or ``templates`` folder: inside the package when installed from a wheel (setup.py
    puts it there), else the source tree's top-level one (a checkout, or an editable install)."""
    installed = Path(__file__).resolve().parent / name
    return installed if installed.is_dir() else ROOT / name


def create_app(engine, *, data_dir: str | Path | None = None, config: dict | None = None,
               spec=None, engine_factory=None) -> Flask:
    """Build the app around ``engine`` (any ``engines.Engine``).

    ``spec`` (an ``engines.registry.EngineSpec``) says what ``engine`` is;
    with ``engine_factory`` (spec → engine) tabs may switch engines live.

    ``config`` may set ``ALLOWED_HOSTS`` (``host:port`` strings the server
    answers to); without it no Origin/Host check is made, as in unit tests.
    ``ACCESS_TOKEN`` (a string) makes every request carry it (security.py).
    ``API_QUEUE`` is how many OpenAI-compatible API requests may queue for the model (default 8); with
    ``API_STORE`` their exchanges are kept in the conversation history (default false).
    ``MODELS_DIR`` is the folder the engine picker lists models from (default ``data_dir/models``).
    ``ALLOW_REMOTE_ENGINES`` and ``ALLOW_DOWNLOADS`` (default false) let a tab's engine spec name servers
    off loopback and hub models not on this machine (engines.registry.TabPolicy).
    ``MCP_CONFIG`` is the MCP servers file (default ``data_dir/mcp.json``); its servers start in the background,
    and ``app.extensions["tools"].close()`` stops them (webapp/tools/).

    Conversations are stored in ``data_dir/specchat.db`` (in memory without a
    data folder); a database that cannot be used raises ``store.StoreError``.
    """
    from engines.registry import TabPolicy

    from .conversations.store import Store
    from .hosting.host import EngineHost
    from .hosting.settings import SettingsStore
    from .measurement.baseline import Baselines
    from .measurement.receipts import Receipts
    from .openai_api.queue import DEFAULT_API_QUEUE
    from .tools.toolbox import ToolBox
    from .web import api, attachments, models, openai_routes, pages, security, tools
    from .web.serving import ReaderThread
    from .web.ws import sock

    app = Flask(
        __name__,
        static_folder=str(page_folder("static")),
        template_folder=str(page_folder("templates")),
    )
    # Dead peers are dropped by pings; frames up to 16 MiB reach our own 1 MiB check,
    # which answers with an error frame instead of closing the socket.
    app.config["SOCK_SERVER_OPTIONS"] = {"ping_interval": 25, "max_message_size": 16 << 20,
                                         "thread_class": ReaderThread}
    app.config.update(config or {})
    security.init_app(app)
    data = Path(data_dir) if data_dir else None
    if app.config.get("MODELS_DIR") is None:
        app.config["MODELS_DIR"] = data / "models" if data else None
    policy = TabPolicy(
        bool(app.config.get("ALLOW_REMOTE_ENGINES")), bool(app.config.get("ALLOW_DOWNLOADS")),
        lambda: [(m["name"], Path(m["path"])) for m in models.listed_models(app.config["MODELS_DIR"])],
    )
    EngineHost(engine, SettingsStore(data), Receipts(data), Baselines(data), spec, engine_factory,
               Store(data), policy, app.config.get("API_QUEUE", DEFAULT_API_QUEUE)).init_app(app)
    ToolBox.for_app(app, data).init_app(app)  # its MCP servers start in the background
    app.extensions["specchat"].tools = app.extensions["tools"]
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)
    app.register_blueprint(attachments.bp)
    app.register_blueprint(openai_routes.bp)
    app.register_blueprint(models.bp)
    app.register_blueprint(tools.bp)
    sock.init_app(app)
    return app
