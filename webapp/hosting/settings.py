"""The live settings: validated, persisted in the data dir, shared by every tab."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import orjson
from pydantic import ValidationError

from engines.options import GenerationOptions

from ..atomic import write_json
from ..errors import ClientError, describe_validation

log = logging.getLogger(__name__)


class SettingsStore:
    def __init__(self, data_dir: Path | None):
        self._path = Path(data_dir) / "settings.json" if data_dir else None
        self._lock = threading.Lock()
        self.current = self._read()

    def _read(self) -> GenerationOptions:
        """The saved settings. A bad file never stops specchat: its valid values are kept, the rest take
        their defaults, and the file itself is kept beside as ``settings.json.bad-<time>``."""
        if self._path is None or not self._path.exists():
            return GenerationOptions()
        try:
            saved = orjson.loads(self._path.read_bytes())
        except (OSError, ValueError) as exc:
            saved, problem = {}, f"unreadable ({exc})"
        else:
            problem = "" if isinstance(saved, dict) else f"not a JSON object but {type(saved).__name__}"
            saved = saved if isinstance(saved, dict) else {}
        options, dropped = GenerationOptions(), []
        for key, value in saved.items():
            if key not in GenerationOptions.model_fields:
                continue  # a setting this version no longer has
            try:
                options = options.updated({key: value})
            except ValidationError:
                dropped.append(key)
        if dropped:
            problem = f"bad values for {', '.join(dropped)} (defaults used)"
        if problem:
            self._set_aside(problem, options)
        return options

    def _set_aside(self, problem: str, options: GenerationOptions) -> None:
        """Keep the bad file beside for the user to look at, and save what was kept of it."""
        bad = self._path.with_name(f"{self._path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            os.replace(self._path, bad)
            self._write(options)
        except OSError as exc:
            log.warning("settings in %s: %s; could not set the file aside (%s)", self._path, problem, exc)
            return
        log.warning("settings in %s: %s; the file is kept as %s", self._path, problem, bad.name)

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
            try:
                self._write(updated)
            except OSError as exc:
                log.warning("could not save settings to %s: %s", self._path, exc)
                raise ClientError(
                    "settings_not_saved",
                    f"Settings not changed: they could not be saved to {self._path} ({exc.strerror or exc}). "
                    "Make the data folder writable (or pass --data-dir), then try again.",
                    500,
                ) from None
            self.current = updated
        return updated

    def _write(self, options: GenerationOptions) -> None:
        if self._path is None:
            return
        write_json(self._path, options.model_dump())
