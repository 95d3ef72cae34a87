"""The functions specchat's own loop calls from mlx-vlm, resolved by name: the gated-delta rule's, ``swiglu`` and
the quantized layers' verify route; and the registry that names a chat template's tool-call parser.

mlx-vlm documents none of them, so a release may rename any of them; ``function`` says which is gone
(``Unavailable``), and the seam (qwen35.py) resolves every one in ``FUNCTIONS`` at load before the own loop runs.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

# (module, attribute) of every function the own loop calls from mlx-vlm.
FUNCTIONS = (
    ("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update"),
    ("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update_with_states"),
    ("mlx_vlm.models.qwen3_5.gated_delta", "_compute_g_beta"),
    ("mlx_vlm.models.activations", "swiglu"),
    ("mlx_vlm.speculative.ops.linear", "_target_verify_linear"),
)


class Unavailable(Exception):
    """The own loop cannot run on this mlx-vlm: the message says what is missing or differs."""


def library_version() -> str:
    try:
        return version("mlx-vlm")
    except PackageNotFoundError:
        return "(not installed)"


def function(module: str, name: str):
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise Unavailable(f"{module}.{name} is gone ({exc})") from None


def gated_delta_update(*args, **kwargs):
    return function("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update")(*args, **kwargs)


def gated_delta_update_with_states(*args):
    return function("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update_with_states")(*args)


def compute_g_beta(A_log, a, b, dt_bias):
    """(decay, beta) of the gated-delta rule for each position, as mlx-vlm computes them."""
    return function("mlx_vlm.models.qwen3_5.gated_delta", "_compute_g_beta")(A_log, a, b, dt_bias)


def swiglu(gate, up):
    return function("mlx_vlm.models.activations", "swiglu")(gate, up)


def verify_linear():
    """mlx-vlm's route for a quantized layer over a verify's few rows: ``(layer, x) -> output``."""
    return function("mlx_vlm.speculative.ops.linear", "_target_verify_linear")


def tool_parser_name(processor) -> str | None:
    """The name of mlx-vlm's tool-call parser for the processor's chat template (None: none fits). Raises
    ImportError where mlx-vlm's tools cannot be imported (they import its server's packages)."""
    return import_module("mlx_vlm.tools")._infer_tool_parser_from_processor(processor)
