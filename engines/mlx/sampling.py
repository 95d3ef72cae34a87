"""How a token is drawn from logits: greedy, or temperature then nucleus (top-p) sampling.

Below both the loop (decoding.py) and the steps (stepper.py), which draw the same way.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def probabilities(logits, sampling: Sampling):
    """The distribution to sample from: temperature, then nucleus (top-p) filtering."""
    import mlx.core as mx

    probs = mx.softmax(logits.astype(mx.float32) / sampling.temperature, axis=-1)
    if sampling.top_p >= 1.0:
        return probs
    order = mx.argsort(-probs, axis=-1)
    sorted_probs = mx.take_along_axis(probs, order, axis=-1)
    keep_sorted = (mx.cumsum(sorted_probs, axis=-1) - sorted_probs) < sampling.top_p
    keep = mx.put_along_axis(mx.zeros_like(keep_sorted), order, keep_sorted, axis=-1)
    probs = mx.where(keep, probs, 0.0)
    return probs / probs.sum(axis=-1, keepdims=True)


def sample(probs):
    import mlx.core as mx

    return mx.random.categorical(mx.log(probs), axis=-1).astype(mx.int32)
