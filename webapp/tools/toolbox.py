"""``ToolBox``: every tool a reply may call, the switches over them, and the calls themselves.

The engines' tool loop uses ``available()`` (what to render for the model), ``call()`` (blocking, cancellable
from another thread, never raising) and ``always_allowed()`` (whether to skip asking); the Tools routes use
``listing()`` and the ``switch_*`` methods. Bound to the app with ``init_app``, which starts the MCP servers
in the background.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engines.options import GenerationOptions

from ..errors import ClientError
from .builtin import builtin_tools, run_builtin
from .clock import local_now
from .config import McpConfig, config_path, read_config
from .results import BUILTIN, ToolResult, ToolSpec, cut, text_part
from .switches import SwitchStore

log = logging.getLogger(__name__)


class ToolBox:
    def __init__(self, options: Callable[[], GenerationOptions], switches: SwitchStore, config: McpConfig,
                 now: Callable[[], dt.datetime] = local_now):
        self._options = options
        self.switches = switches
        self.config = config
        self._builtin = builtin_tools(now)
        self._mcp = None
        if config.servers:
            from .mcp_client import McpServers  # the SDK is imported only when a server is configured

            self._mcp = McpServers(config.servers)

    @classmethod
    def for_app(cls, app, data_dir: Path | None) -> ToolBox:
        """The servers of ``MCP_CONFIG`` (``--mcp-config``), else of the data folder's mcp.json; the settings
        are the app's live ones."""
        flag = app.config.get("MCP_CONFIG")
        config = read_config(config_path(data_dir, flag), required=flag is not None)
        return cls(lambda: app.extensions["specchat"].settings.current, SwitchStore(data_dir), config)

    def init_app(self, app) -> None:
        app.extensions["tools"] = self
        self.start()

    def start(self) -> None:
        """Start the MCP servers in the background; nothing here waits for one."""
        if self.config.error:
            log.warning("%s", self.config.error)
        if self._mcp is not None:
            self._mcp.start()

    def close(self) -> None:
        """Stop every MCP server (bounded)."""
        if self._mcp is not None:
            self._mcp.close()

    # --- for the engines' tool loop -------------------------------------------------------------------------

    def available(self) -> list[ToolSpec]:
        """The tools to offer the model now: none with the ``tools`` setting off, else every tool switched on
        whose server has listed its tools."""
        if not self._options().tools:
            return []
        return [tool for status in self._statuses() if self.switches.server_on(status["name"])
                for tool in status["tools"] if self.switches.tool_on(tool.server, tool.name)]

    def always_allowed(self, server: str, name: str) -> bool:
        return self.switches.always_allowed(server, name)

    def call(self, server: str, name: str, arguments: dict, timeout_s: float | None = None,
             cancel: threading.Event | None = None) -> ToolResult:
        """Call tool ``name`` of ``server`` and block until its result, at most ``timeout_s`` (default: the
        ``tool_timeout_s`` setting), or until ``cancel`` is set. Never raises: a failure (unknown tool, bad
        arguments, a server that died, the timeout, the cancel) is a result with ``ok`` false whose text says
        what happened. The text is cut to the ``tool_result_chars`` setting."""
        options = self._options()
        result = self._dispatch(options, server, name, arguments,
                                options.tool_timeout_s if timeout_s is None else timeout_s, cancel)
        return ToolResult(result.ok, cut(result.content, options.tool_result_chars), result.ms)

    def _dispatch(self, options: GenerationOptions, server: str, name: str, arguments, timeout_s: float,
                  cancel: threading.Event | None) -> ToolResult:
        started = time.perf_counter()

        def failed(message: str) -> ToolResult:
            return ToolResult(False, [text_part(message)], (time.perf_counter() - started) * 1000)

        if not options.tools:
            return failed("Tools are switched off (the tools setting): no tool was called.")
        if not isinstance(arguments, dict):
            return failed(f"The arguments to {name} must be a JSON object, not {type(arguments).__name__}.")
        if not self.switches.server_on(server) or not self.switches.tool_on(server, name):
            return failed(f"The tool {name} of {server} is switched off in the Tools settings.")
        if cancel is not None and cancel.is_set():
            return failed(f"The call to {name} was stopped.")
        if server == BUILTIN:
            tool = self._builtin.get(name)
            if tool is None:
                return failed(f"There is no built-in tool {name!r}: they are {', '.join(self._builtin)}.")
            return run_builtin(tool, arguments)
        if self._mcp is None:
            return failed(f"There is no MCP server {server!r}.")
        return self._mcp.call(server, name, arguments, timeout_s, cancel)

    # --- for the routes ---------------------------------------------------------------------------------------

    def _statuses(self) -> list[dict]:
        builtin = {"name": BUILTIN, "transport": BUILTIN, "state": "ready", "error": None,
                   "tools": [tool.spec() for tool in self._builtin.values()]}
        mcp = self._mcp.statuses() if self._mcp is not None else []
        return [builtin, *({"name": s.name, "transport": s.transport, "state": s.state, "error": s.error,
                            "tools": s.tools} for s in mcp)]

    def listing(self) -> dict:
        """``servers``: each with name, transport, state, error, enabled and its tools (name, description,
        enabled, always_allow); ``config_error``: why the MCP servers file could not be used, or null."""
        servers = []
        for status in self._statuses():
            name = status["name"]
            tools = [{"name": tool.name, "description": tool.description,
                      "enabled": self.switches.tool_on(name, tool.name),
                      "always_allow": self.switches.always_allowed(name, tool.name)} for tool in status["tools"]]
            servers.append({**status, "enabled": self.switches.server_on(name), "tools": tools})
        return {"servers": servers, "config_error": self.config.error}

    def server(self, server: str) -> dict:
        found = next((s for s in self.listing()["servers"] if s["name"] == server), None)
        if found is None:
            raise ClientError("unknown_server", f"There is no tool server {server!r}: GET /api/tools lists them. "
                              "Servers are added in the MCP servers file (mcp.json) or with --mcp-config.", 404)
        return found

    def tool(self, server: str, name: str) -> dict:
        found = self.server(server)
        tool = next((t for t in found["tools"] if t["name"] == name), None)
        if tool is None:
            listed = "its tools are not known until it is ready" if found["state"] != "ready" else \
                f"its tools are {', '.join(t['name'] for t in found['tools']) or 'none'}"
            raise ClientError("unknown_tool", f"{server} has no tool {name!r}: {listed}.", 404)
        return tool

    def switch_server(self, server: str, enabled: bool) -> dict:
        self.server(server)
        self.switches.set_server(server, enabled)
        return self.server(server)

    def switch_tool(self, server: str, name: str, enabled: bool | None, always_allow: bool | None) -> dict:
        self.tool(server, name)
        self.switches.set_tool(server, name, enabled, always_allow)
        return self.tool(server, name)
