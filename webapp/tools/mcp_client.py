"""MCP servers, on the official ``mcp`` SDK: one asyncio loop in a daemon thread owns every server's session.

Each server starts in the background (``starting``), then is ``ready`` with its tools or ``failed`` with why.
A call is addressed by (server, tool) and goes to that server's session alone. A server that dies fails the
call it was in and is started again on its next use; a call past its time is cancelled; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED

from .config import ConfiguredServer, HttpServer
from .results import ToolResult, ToolSpec, empty_schema, image_part, text_part

log = logging.getLogger(__name__)

START_TIMEOUT_S = 30.0  # from launch to the tool list
CLOSE_TIMEOUT_S = 5.0
POLL_S = 0.02  # how often a waiting caller looks at its cancel event
GRACE_S = 5.0  # past a call's own timeout, the caller stops waiting for the loop at all
MAX_TOOL_PAGES = 100
STDERR_TAIL = 500  # characters of a server's stderr quoted in its error


@dataclass(frozen=True)
class ServerStatus:
    name: str
    transport: str
    state: str  # starting | ready | failed
    error: str | None
    tools: list[ToolSpec]


class _CallFailed(Exception):
    """A call that did not reach a result: its message is for the model."""


class Connection:
    """One server's session, lived on the loop: every method runs in the loop's thread."""

    def __init__(self, server: ConfiguredServer):
        self.name, self.transport, self.config = server.name, server.transport, server.config
        self.state = "starting" if server.config is not None else "failed"
        self.error = server.error
        self.tools: list[ToolSpec] = []  # kept after a death: they are offered again once it is restarted
        self.task: asyncio.Task | None = None
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._errlog = None

    def launch(self) -> None:
        self.state, self.error = "starting", None
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._serve())
        asyncio.get_running_loop().call_later(START_TIMEOUT_S, self._give_up, self.task)

    def stop(self) -> None:
        self._stop.set()

    def _give_up(self, task: asyncio.Task) -> None:
        if task is self.task and self.state == "starting":
            self._fail(f"did not answer within {START_TIMEOUT_S:.0f} s of starting{self._stderr()}")
            log.warning("MCP server %s: %s", self.name, self.error)
            task.cancel()

    def _fail(self, error: str) -> None:
        self.state, self.error = "failed", error
        self._stop.set()
        self._ready.set()

    async def _serve(self) -> None:
        try:
            if await self._session(may_retry=True):
                await self._session(may_retry=False)
        finally:
            self._client = None
            self._ready.set()

    async def _session(self, may_retry: bool) -> bool:
        """Run the server's session until it stops; True where its start failed on an interpreter fault and may
        be tried once more."""
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
            self._errlog = errlog
            try:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(await self.open_client(stack, errlog))
                    self.tools = await self._list_tools(client)
                    self._client, self.state = client, "ready"
                    self._ready.set()
                    log.info("MCP server %s: ready with %d tools", self.name, len(self.tools))
                    await self._stop.wait()
            except Exception as exc:  # whatever the SDK or the server raised, starting or later
                # CPython 3.11 can raise SystemError ("AST constructor recursion depth mismatch", cpython#106905)
                # where two threads build syntax trees at once, as the SDK's imports and any traceback do: not
                # the server's fault, so such a start is tried again.
                if may_retry and self.state == "starting" and isinstance(_leaf(exc), SystemError):
                    log.warning("MCP server %s: starting again after %s", self.name, _leaf(exc))
                    return True
                if self.state != "failed":
                    self._fail(self._why(exc) if self.state == "starting" else
                               f"stopped ({type(exc).__name__}: {exc}); it is started again on its next use")
                    log.warning("MCP server %s: %s", self.name, self.error)
            finally:
                self._errlog = None
        return False

    async def open_client(self, stack: AsyncExitStack, errlog) -> Client:
        """The SDK's client for this server, over a transport entered on ``stack`` (stderr to ``errlog``)."""
        config = self.config
        if isinstance(config, HttpServer):
            # The SDK's own timeouts (30 s, reads 300 s: a response may stream for long), with the file's headers.
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=config.headers, timeout=httpx2.Timeout(30.0, read=300.0)))
            return Client(streamable_http_client(config.url, http_client=http), cache=None)
        parameters = StdioServerParameters(command=config.command, args=config.args, env=config.env or None,
                                           cwd=config.cwd)
        return Client(stdio_client(parameters, errlog=errlog), cache=None)

    async def _list_tools(self, client: Client) -> list[ToolSpec]:
        tools, cursor = [], None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += [ToolSpec(self.name, tool.name, tool.description or "",
                               tool.input_schema or empty_schema()) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _stderr(self) -> str:
        if self._errlog is None:
            return ""
        try:
            self._errlog.seek(0)
            lines = [line.strip() for line in self._errlog.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        tail = " / ".join(lines[-3:])[-STDERR_TAIL:]
        return f"; it said: {tail}" if tail else ""

    def _why(self, exc: BaseException) -> str:
        cause = _leaf(exc)
        if isinstance(cause, FileNotFoundError) and self.transport == "stdio":
            return (f"cannot run {self.config.command!r}: no such program. Fix \"command\" in the MCP servers "
                    f"file (a full path, or a program on PATH) and restart specchat")
        if isinstance(cause, OSError) and self.transport == "stdio":
            return f"cannot run {self.config.command!r} ({cause.strerror or cause}){self._stderr()}"
        if isinstance(cause, MCPError) and cause.code == CONNECTION_CLOSED:
            return f"exited before it answered{self._stderr()}"
        if isinstance(cause, httpx2.HTTPError):
            return f"cannot reach {self.config.url} ({type(cause).__name__}: {cause})"
        return f"could not start ({type(cause).__name__}: {cause}){self._stderr()}"

    async def call(self, name: str, arguments: dict) -> ToolResult:
        started = time.perf_counter()
        if self.state != "ready":
            if self.config is None:
                raise _CallFailed(f"MCP server {self.name} cannot be used: {self.error}")
            if self.state == "failed" and self.task is not None and not self.task.done():
                await asyncio.wait({self.task}, timeout=CLOSE_TIMEOUT_S)  # the dead session's own teardown
            if self.state == "failed":  # checked again: a call that waited beside this one may have launched
                self.launch()
            await self._ready.wait()
            if self.state != "ready":
                raise _CallFailed(f"MCP server {self.name} could not be started: {self.error}")
        if name not in {tool.name for tool in self.tools}:
            raise _CallFailed(f"MCP server {self.name} has no tool {name!r}: its tools are "
                              f"{', '.join(tool.name for tool in self.tools) or 'none'}.")
        try:
            result = await self._client.call_tool(name, arguments)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._fail(f"stopped during a call to {name}{self._stderr()}; it is started again on its next use")
                raise _CallFailed(f"MCP server {self.name} stopped during the call to {name}; it is started again "
                                  "on its next use.") from None
            raise _CallFailed(f"MCP server {self.name} refused the call to {name}: {exc.message}") from None
        except Exception as exc:  # an answer the SDK could not read: this call fails, the server stays
            raise _CallFailed(f"The call to {name} on MCP server {self.name} failed: {exc}") from None
        return ToolResult(not result.is_error, _content(result), (time.perf_counter() - started) * 1000)


def _leaf(exc: BaseException) -> BaseException:
    """The first real cause inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = next((e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)), exc.exceptions[0])
    return exc


def _content(result) -> list[dict]:
    parts = []
    for block in result.content:
        if block.type == "text":
            parts.append(text_part(block.text))
        elif block.type == "image":
            parts.append(image_part(block.data, block.mime_type))
        elif block.type == "resource":
            resource = block.resource
            parts.append(text_part(getattr(resource, "text", None) or f"[a resource: {resource.uri}]"))
        elif block.type == "resource_link":
            parts.append(text_part(f"[a link to {block.name}: {block.uri}]"))
        else:
            parts.append(text_part(f"[{block.type} content, which specchat does not pass on]"))
    if not parts and result.structured_content is not None:
        parts.append(text_part(json.dumps(result.structured_content, ensure_ascii=False)))
    return parts


class McpServers:
    """The configured servers, started by ``start()`` in the background, called from any thread."""

    def __init__(self, servers: list[ConfiguredServer]):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-servers", daemon=True)
        self._connections = {server.name: Connection(server) for server in servers}
        self._closed = False

    def start(self) -> None:
        self._thread.start()
        for connection in self._connections.values():
            if connection.config is not None:
                self._loop.call_soon_threadsafe(connection.launch)

    def statuses(self) -> list[ServerStatus]:
        return [ServerStatus(c.name, c.transport, c.state, c.error, list(c.tools))
                for c in self._connections.values()]

    def call(self, server: str, name: str, arguments: dict, timeout_s: float,
             cancel: threading.Event | None = None) -> ToolResult:
        """Blocks until the result, ``timeout_s`` or ``cancel``; never raises."""
        started = time.perf_counter()

        def failed(message: str) -> ToolResult:
            return ToolResult(False, [text_part(message)], (time.perf_counter() - started) * 1000)

        connection = self._connections.get(server)
        if connection is None:
            return failed(f"There is no MCP server {server!r}.")
        if self._closed:
            return failed("specchat is shutting down: the tool was not called.")
        future = asyncio.run_coroutine_threadsafe(self._call(connection, name, arguments, timeout_s), self._loop)
        deadline = started + timeout_s + GRACE_S
        while True:
            try:
                return future.result(timeout=POLL_S)
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    return failed(f"The call to {name} was stopped.")
                if time.perf_counter() > deadline:
                    future.cancel()
                    return failed(f"The call to {name} on MCP server {server} did not end: specchat stopped "
                                  "waiting for it.")
            except concurrent.futures.CancelledError:
                return failed(f"The call to {name} was stopped.")

    async def _call(self, connection: Connection, name: str, arguments: dict, timeout_s: float) -> ToolResult:
        started = time.perf_counter()

        def failed(message: str) -> ToolResult:
            return ToolResult(False, [text_part(message)], (time.perf_counter() - started) * 1000)

        try:
            return await asyncio.wait_for(connection.call(name, arguments), timeout_s)
        except TimeoutError:
            return failed(f"The call to {name} on MCP server {connection.name} took longer than {timeout_s:g} s "
                          "(tool_timeout_s) and was cancelled.")
        except _CallFailed as exc:
            return failed(str(exc))

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        """Stop every server (each transport's own shutdown, bounded), then the loop."""
        if self._closed or not self._thread.is_alive():
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._close_all(timeout_s), self._loop).result(timeout_s + 2)
        except (concurrent.futures.TimeoutError, RuntimeError) as exc:
            log.warning("MCP servers did not all stop in time: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=2)
        log.info("MCP servers stopped")

    async def _close_all(self, timeout_s: float) -> None:
        tasks = [c.task for c in self._connections.values() if c.task is not None and not c.task.done()]
        for connection in self._connections.values():
            connection.stop()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1)
