"""Which engine to run, as a validated spec, and building it (heavy imports stay inside)."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .base import Engine
from .errors import EngineError

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


def create_engine(spec: EngineSpec) -> Engine:
    """Build (not load) the engine; raises EngineError (ModelNotFound for a bad path) with a fix."""
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

        return MtplxEngine(spec.base_url or MTPLX_URL, spec.model, spec.api_key)
    from .mlx import MlxEngine
    from .mlx.loading import check_model_dir

    model = spec.model
    if model is None:
        from demo_model import DEFAULT_MODEL

        model = str(DEFAULT_MODEL)
    check_model_dir(model)
    if spec.drafter not in (None, "none"):
        check_model_dir(spec.drafter)
    return MlxEngine(model, spec.drafter)
