"""The in-process MLX engine (mlx-vlm). Importing this package does not import MLX."""

from .engine import MlxEngine

__all__ = ["MlxEngine"]
