"""Which engine to run, as a validated spec, and building it (heavy imports stay inside).

The command line names any engine. A spec from a tab (the settings pane, ``POST /api/engine``) is held to a
``TabPolicy``: http(s) server addresses on loopback, models the picker lists, no downloads, unless the
command line allows more (``--allow-remote-engines``, ``--allow-downloads``).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from .base import Engine
from .errors import EngineError

if TYPE_CHECKING:
    from .mlx.drafter_search import DrafterSearch

NAMES = ("mlx", "mtplx", "openai")
MTPLX_URL = "http://127.0.0.1:8766"


class EngineSpec(BaseModel):
    """What the command line or the settings pane asks for."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: Literal["mlx", "mtplx", "openai", "fake"] = "mlx"
    model: str | None = Field(None, max_length=4096)
    drafter: str | None = Field(None, max_length=4096)
    base_url: str | None = Field(None, max_length=4096)
    api_key: str | None = Field(None, max_length=4096)

    def public(self) -> dict:
        """The spec as tabs see it: the key itself never leaves the server."""
        return {**self.model_dump(exclude={"api_key"}), "api_key_set": bool(self.api_key)}


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_loopback(host: str) -> bool:
    """A loopback address written out (``localhost``, 127.0.0.0/8, ``::1``); a name that resolves to one is not."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def invalid(message: str) -> EngineError:
    return EngineError(message, code="invalid_engine")


@dataclass(frozen=True)
class TabPolicy:
    """What an engine spec from a tab may name."""

    allow_remote: bool = False  # servers off loopback (--allow-remote-engines)
    allow_downloads: bool = False  # hub models not yet on this machine (--allow-downloads)
    # The models the engine picker lists, as (name, folder): the only local models a tab may load.
    models: Callable[[], Iterable[tuple[str, Path]]] = field(default=lambda: ())

    def check_url(self, url: str) -> str:
        """``url`` when a tab may have specchat connect there; else EngineError saying what is allowed."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise invalid(f"A server address must be http:// or https:// with a host, e.g. "
                          f"http://127.0.0.1:8080/v1, not {url[:200]!r}.")
        if not self.allow_remote and not is_loopback(parts.hostname):
            raise invalid(f"From the settings pane specchat connects only to servers on this machine's loopback "
                          f"address (127.0.0.1, ::1, localhost), not {parts.hostname[:100]}. To use other hosts, "
                          "start specchat with --allow-remote-engines.")
        return url

    def local_model(self, name: str, role: str) -> str | None:
        """The folder of the listed model ``name`` names (by name or folder), or None for a hub id that may
        be fetched; EngineError otherwise, which tells nothing of the disk beyond the listed models."""
        wanted = Path(name).expanduser()
        for listed, folder in self.models():
            if name == listed or (wanted.is_absolute() and wanted.resolve() == folder.resolve()):
                return str(folder)
        if self.allow_downloads and HUB_ID.fullmatch(name):
            return None
        listed = sorted(listed for listed, _ in self.models())
        offer = f"Pick one the picker lists ({', '.join(listed[:8])}{', …' if len(listed) > 8 else ''})" \
            if listed else "No model is listed here"
        fetch = "" if self.allow_downloads else ", or --allow-downloads to let a tab fetch hub models"
        raise invalid(f"{name[:200]!r} is not a {role} specchat lists. {offer}; to load another, put its folder in "
                      f"the models folder (--models-dir) or start specchat with --model{fetch}.")

    def restrict(self, spec: EngineSpec) -> EngineSpec:
        """``spec`` with each model a listed folder (so loading it fetches nothing); EngineError when a tab
        may not ask for it."""
        changes: dict = {}
        if spec.name in ("openai", "mtplx") and spec.base_url:
            self.check_url(spec.base_url)
        if spec.name == "mtplx" and spec.model:
            self.local_model(spec.model, "model")  # mtplx serve finds a listed one itself, by name or folder
        if spec.name == "mlx":
            if spec.model:
                changes["model"] = self.local_model(spec.model, "model") or spec.model
            if spec.drafter not in (None, "none"):
                changes["drafter"] = self.local_model(spec.drafter, "drafter") or spec.drafter
        return spec.model_copy(update=changes)


def create_engine(spec: EngineSpec, policy: TabPolicy | None = None,
                  drafters: DrafterSearch | None = None, kernels=None) -> Engine:
    """Build (not load) the engine; raises EngineError (ModelNotFound for a bad path) with a fix.

    ``policy``: the spec came from a tab and is held to it (``None``: from the command line).
    ``drafters``: where the MLX engine looks for the head of a checkpoint converted without it.
    ``kernels``: the MLX engine's ``KernelChoice`` (a benchmark's; None: the default)."""
    if policy is not None:
        spec = policy.restrict(spec)
    if spec.name == "fake":
        from .fake import FakeEngine

        # A slower fake gives a test time to act mid-reply on a real server process (e.g. kill it).
        return FakeEngine(delay_s=float(os.environ.get("SPECCHAT_FAKE_DELAY_S") or 0.005))
    if spec.name == "openai":
        if not spec.base_url:
            raise EngineError("The openai engine needs the server's /v1 URL, e.g. http://127.0.0.1:8080/v1.",
                              code="invalid_engine")
        from .openai_compat import OpenAICompatEngine

        return OpenAICompatEngine(spec.base_url, spec.model, spec.api_key)
    if spec.name == "mtplx":
        from .mtplx import MtplxEngine

        url = spec.base_url or MTPLX_URL
        # A tab's daemon is started only on loopback, never listening on every interface.
        return MtplxEngine(url, spec.model, spec.api_key, download=policy is None or policy.allow_downloads,
                           may_start=policy is None or is_loopback(urlsplit(url).hostname or ""))
    from .mlx import MlxEngine
    from .mlx.loading import DRAFTER, check_model_dir

    model = spec.model
    if model is None:
        from demo_model import DEFAULT_MODEL

        model = str(DEFAULT_MODEL)
    check_model_dir(model)
    if spec.drafter not in (None, "none"):
        check_model_dir(spec.drafter, DRAFTER)
    return MlxEngine(model, spec.drafter, drafters) if kernels is None else MlxEngine(model, spec.drafter,
                                                                                      drafters, kernels)
