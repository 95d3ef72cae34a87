"""Which servers and tools are switched off, and which tools may run without asking: persisted in the data
folder (``tools.json``), as the settings are in ``settings.json``.

Only what differs from the defaults is stored (every tool on, every call asked about), so a server that comes
later, or a tool a server adds, starts on.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ..atomic import write_json
from ..errors import ClientError

log = logging.getLogger(__name__)
FILE_NAME = "tools.json"


class Switches(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    servers_off: list[str] = []
    tools_off: dict[str, list[str]] = {}
    always_allow: dict[str, list[str]] = {}


def _with(names: dict[str, list[str]], server: str, tool: str, on: bool) -> dict[str, list[str]]:
    kept = [name for name in names.get(server, []) if name != tool] + ([tool] if on else [])
    return {**{k: v for k, v in names.items() if k != server}, **({server: sorted(kept)} if kept else {})}


class SwitchStore:
    def __init__(self, data_dir: Path | None):
        self._path = Path(data_dir) / FILE_NAME if data_dir else None
        self._lock = threading.Lock()
        self.current = self._read()

    def _read(self) -> Switches:
        """A bad file never stops specchat: every tool is on again, and the file is kept beside."""
        if self._path is None or not self._path.exists():
            return Switches()
        try:
            return Switches.model_validate(orjson.loads(self._path.read_bytes()))
        except (OSError, ValueError, ValidationError) as exc:
            bad = self._path.with_name(f"{self._path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
            try:
                os.replace(self._path, bad)
            except OSError:
                bad = self._path
            log.warning("tool switches in %s unusable (%s): every tool is on; the file is kept as %s",
                        self._path, exc, bad.name)
            return Switches()

    def server_on(self, server: str) -> bool:
        return server not in self.current.servers_off

    def tool_on(self, server: str, tool: str) -> bool:
        return tool not in self.current.tools_off.get(server, [])

    def always_allowed(self, server: str, tool: str) -> bool:
        return tool in self.current.always_allow.get(server, [])

    def set_server(self, server: str, enabled: bool) -> None:
        self._change(lambda s: s.model_copy(update={
            "servers_off": sorted(set(s.servers_off) - {server} | (set() if enabled else {server}))}))

    def set_tool(self, server: str, tool: str, enabled: bool | None = None, always_allow: bool | None = None) -> None:
        def change(s: Switches) -> Switches:
            update = {}
            if enabled is not None:
                update["tools_off"] = _with(s.tools_off, server, tool, not enabled)
            if always_allow is not None:
                update["always_allow"] = _with(s.always_allow, server, tool, always_allow)
            return s.model_copy(update=update)

        self._change(change)

    def _change(self, change) -> None:
        with self._lock:
            updated = change(self.current)
            if self._path is not None:
                try:
                    write_json(self._path, updated.model_dump())
                except OSError as exc:
                    raise ClientError(
                        "tools_not_saved",
                        f"Not changed: the tool switches could not be saved to {self._path} "
                        f"({exc.strerror or exc}). Make the data folder writable (or pass --data-dir), then try "
                        "again.", 500) from None
            self.current = updated
