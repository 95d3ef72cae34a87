"""A real MCP server for the tools tests, written with the SDK; run as a script, over stdio or streamable HTTP.

    python -m tests.support.mcp_servers --name NAME [--http PORT [--port-file PATH]] [--fail] [--delay S]
                                         [--pid-file PATH] [--lifetime S]

Its tools: ``echo`` (answers with the server's name, so a test sees which server took a call), ``add`` (typed
arguments), ``hang`` (sleeps), ``crash`` (the process dies mid-call), ``image`` (a tiny PNG) and ``big`` (a long
text). ``--fail`` exits before speaking MCP, as a server with a bad setup does; ``--delay`` starts it slowly;
``--pid-file`` says which process it is;
every server ends itself after ``--lifetime`` seconds, so none outlives a test run.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import sys
import threading
import time

import anyio
from mcp.server.mcpserver import Image, MCPServer

# 1×1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")
FAILURE = "this server cannot start: its database is missing"


def build(name: str) -> MCPServer:
    server = MCPServer(name, log_level="WARNING")

    @server.tool(description="Answer with this server's name and the text.")
    def echo(text: str) -> str:
        return f"{name}: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Sleep for the given seconds, then answer.")
    async def hang(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "woke up"

    @server.tool(description="Die in the middle of the call.")
    def crash() -> str:
        os._exit(3)

    @server.tool(description="A tiny PNG image.")
    def image() -> Image:
        return Image(data=PNG, format="png")

    @server.tool(description="A text of n characters.")
    def big(n: int) -> str:
        return "x" * n

    return server


def end_after(seconds: float) -> None:
    """A server that a test forgot still ends: the whole process goes after ``seconds``."""
    def end():
        time.sleep(seconds)
        os._exit(0)

    threading.Thread(target=end, daemon=True).start()


def serve_http(server, port: int, port_file: str | None) -> None:
    """Serve on a socket bound here, so that with port 0 no other process can take the port between its choice
    and its use; its number goes to ``port_file`` once it listens."""
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    if port_file:
        with open(port_file + ".part", "w") as file:
            file.write(str(listener.getsockname()[1]))
        os.replace(port_file + ".part", port_file)  # whole or absent for the reader
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mcp_servers")
    parser.add_argument("--name", default="test")
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on 127.0.0.1:PORT (0: any)")
    parser.add_argument("--port-file", default=None, help="write the HTTP port there once it listens")
    parser.add_argument("--fail", action="store_true", help="exit at once with an error")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before serving (a slow start)")
    parser.add_argument("--pid-file", default=None, help="write this process's id there, for a test to watch it")
    parser.add_argument("--lifetime", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.fail:
        print(FAILURE, file=sys.stderr)
        return 1
    end_after(args.lifetime)
    if args.pid_file:
        with open(args.pid_file, "w") as file:
            file.write(str(os.getpid()))
    time.sleep(args.delay)
    server = build(args.name)
    if args.http is not None:
        serve_http(server, args.http, args.port_file)
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
