"""The MTPLX daemon engine: a supervised ``mtplx serve`` behind the OpenAI-compatible client."""

from .engine import MtplxEngine
from .supervisor import MtplxSupervisor

__all__ = ["MtplxEngine", "MtplxSupervisor"]
