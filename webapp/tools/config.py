"""The MCP servers to start, read from an ``mcp.json`` in the ``mcpServers`` format that Claude Desktop,
Cursor and LM Studio share:

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                              "env": {}},
                    "search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer …"}}}}

A ``command`` is a program run over stdio, a ``url`` a streamable HTTP server. A file that cannot be read is one
error for the Tools section; a bad entry fails that server alone, with what to change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import describe_validation
from .results import BUILTIN

FILE_NAME = "mcp.json"
SERVER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class StdioServer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: str | None = None
    disabled: bool = False


class HttpServer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["http", "streamable-http", "streamableHttp"] = "http"
    url: str
    headers: dict[str, str] = {}
    disabled: bool = False

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not re.match(r"https?://[^/\s]+", url):
            raise ValueError(f"{url!r} is not an http:// or https:// address")
        return url


ServerConfig = StdioServer | HttpServer


@dataclass(frozen=True)
class ConfiguredServer:
    """One entry of the file: its settings, or why they are wrong (then it is listed as failed)."""

    name: str
    transport: str
    config: ServerConfig | None
    error: str | None = None


@dataclass(frozen=True)
class McpConfig:
    servers: list[ConfiguredServer]
    error: str | None = None  # the file as a whole could not be used


def config_path(data_dir: Path | None, flag: Path | None) -> Path | None:
    """``--mcp-config PATH``, else the data folder's mcp.json."""
    if flag is not None:
        return Path(flag).expanduser()
    return Path(data_dir) / FILE_NAME if data_dir else None


def read_config(path: Path | None, required: bool = False) -> McpConfig:
    """The servers of the file at ``path``; none when there is no file (an error too when it was asked for)."""
    if path is None or (not required and not path.exists()):
        return McpConfig([])
    example = '{"mcpServers": {"NAME": {"command": "PROGRAM", "args": []}}}'
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        return McpConfig([], f"The MCP servers file {path} cannot be read ({exc.strerror or exc}): fix "
                               "the path given to --mcp-config, or the file's permissions.")
    except orjson.JSONDecodeError as exc:
        return McpConfig([], f"The MCP servers file {path} is not valid JSON ({exc}): fix it, e.g. "
                               f"{example}, and restart specchat.")
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return McpConfig([], f"The MCP servers file {path} has no \"mcpServers\" object: write it as "
                               f"{example}, and restart specchat.")
    # A name that cannot be listed or addressed (/api/tools/<server>) is the file's error; its entry is left out.
    bad = [name for name in servers if name == BUILTIN or not SERVER_NAME.fullmatch(name)]
    error = (f"The MCP servers file {path} names servers {', '.join(map(repr, bad))}, which were not started: a "
             f"name must be 1 to 64 letters, digits, '.', '_' or '-', and not {BUILTIN!r} (specchat's own tools). "
             "Rename them and restart specchat.") if bad else None
    parsed = [parse_server(name, entry) for name, entry in servers.items() if name not in bad]
    # "disabled": true keeps an entry in the file without starting it, as other MCP hosts read it.
    return McpConfig([server for server in parsed if server.config is None or not server.config.disabled], error)


def parse_server(name: str, entry: object) -> ConfiguredServer:
    fix = "fix it in the MCP servers file and restart specchat"
    if not isinstance(entry, dict):
        return ConfiguredServer(name, "unknown", None, f"Server {name!r} is not an object: give it a \"command\" "
                                                       f"(stdio) or a \"url\" (streamable HTTP); {fix}.")
    kind = entry.get("type")
    if kind == "sse":
        return ConfiguredServer(name, "sse", None, f"Server {name!r} uses SSE, which specchat does not speak: "
                                                   f"give the server's streamable HTTP address as \"url\"; {fix}.")
    model = HttpServer if "url" in entry or kind in ("http", "streamable-http", "streamableHttp") else StdioServer
    transport = "http" if model is HttpServer else "stdio"
    try:
        config = model.model_validate(entry)
    except ValidationError as exc:
        return ConfiguredServer(name, transport, None, f"Server {name!r}: {describe_validation(exc)}; {fix}.")
    return ConfiguredServer(name, transport, config)
