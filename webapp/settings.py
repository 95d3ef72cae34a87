"""The live settings: validated, persisted in the data dir, shared by every tab."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import orjson
from pydantic import ValidationError

from engines.options import GenerationOptions

from .errors import ClientError, describe_validation

log = logging.getLogger(__name__)


class SettingsStore:
    def __init__(self, data_dir: Path | None):
        self._path = Path(data_dir) / "settings.json" if data_dir else None
        self._lock = threading.Lock()
        self.current = self._read()

    def _read(self) -> GenerationOptions:
        if self._path is None or not self._path.exists():
            return GenerationOptions()
        try:
            saved = orjson.loads(self._path.read_bytes())
            known = {k: v for k, v in saved.items() if k in GenerationOptions.model_fields}
            return GenerationOptions().updated(known)
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("ignoring unreadable settings in %s (%s); using defaults", self._path, exc)
            return GenerationOptions()

    def update(self, values: dict) -> GenerationOptions:
        """Apply a partial update atomically; bad values change nothing and raise ClientError."""
        unknown = sorted(set(values) - set(GenerationOptions.model_fields))
        if unknown:
            raise ClientError(
                "invalid_settings",
                f"Unknown setting {', '.join(unknown)}: known ones are {', '.join(GenerationOptions.model_fields)}.",
            )
        with self._lock:
            try:
                updated = self.current.updated(values)
            except ValidationError as exc:
                raise ClientError("invalid_settings", f"Settings not changed: {describe_validation(exc)}.") from None
            self.current = updated
            self._write(updated)
        return updated

    def _write(self, options: GenerationOptions) -> None:
        if self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(options.model_dump(), option=orjson.OPT_INDENT_2))
        os.replace(tmp, self._path)
