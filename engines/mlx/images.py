"""Images in a prompt: whether a checkpoint can see, the checkpoint's own processor, and placeholder ids.

A prompt holds one run of ``<|image_pad|>`` ids per image, as many as the processor makes of it
(grid_thw / merge_size²), so every image of one size becomes the same run of ids: a cache is reused only
when the images it holds (by content, ``sha256``) are the prompt's too.
"""

from __future__ import annotations

import io
import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..base import Image, Message
from ..errors import EngineError
from .loading import LoadedModel

PROCESSED_KEPT = 16  # processed images kept, by content: a conversation's images, not reprocessed every turn
VISION_MODELS = ("qwen3_5", "qwen3_5_moe")  # whose images go through Qwen3-VL's processor and M-RoPE here
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")
HOW_TO_SEE = ("Load a checkpoint with its vision tower and its image processor's config, e.g. Qwen/Qwen3.5-4B "
              "converted by mlx_vlm.convert.")


def vision_note(loaded: LoadedModel) -> str | None:
    """Why ``loaded`` cannot take images, and how to get one that can; None when it can."""
    model_type = loaded.config.get("model_type")
    if model_type not in VISION_MODELS:
        return f"This model ({model_type}) cannot take images here: specchat feeds images to Qwen 3.5 models. " \
               + HOW_TO_SEE
    if getattr(loaded.model, "vision_tower", None) is None:
        return ("This checkpoint has no vision tower (it was converted with its tower left out), so it cannot "
                "see images. " + HOW_TO_SEE)
    if not has_image_processor_config(loaded.path):
        return ("This checkpoint has no image processor config (preprocessor_config.json), so it cannot see "
                "images: its tower was never set up for them. " + HOW_TO_SEE)
    processor = getattr(loaded.processor, "image_processor", None)
    tower = loaded.config.get("vision_config") or {}
    if processor is None or getattr(processor, "patch_size", None) != tower.get("patch_size"):
        return (f"This checkpoint's image processor cuts {getattr(processor, 'patch_size', None)}-pixel patches "
                f"but its vision tower takes {tower.get('patch_size')}-pixel ones, so it cannot see images. "
                + HOW_TO_SEE)
    return None


def has_image_processor_config(folder: Path) -> bool:
    """The folder holds the image processor's settings (its resizing bounds), as mlx-vlm reads them."""
    for name in PROCESSOR_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if name == PROCESSOR_FILES[0] or isinstance(config.get("image_processor"), dict):
            return True
    return False


def pil_image(image: Image):
    """The image as the processor takes it: EXIF rotation applied, a GIF's first frame, RGB."""
    from PIL import Image as PILImage, ImageOps

    picture = PILImage.open(io.BytesIO(image.data))
    picture.seek(0)
    return ImageOps.exif_transpose(picture).convert("RGB")


def prompt_images(messages: Iterable[Message]) -> tuple[Image, ...]:
    """Every image of ``messages`` (the user's and tools' results'), in the order the prompt holds them."""
    return tuple(image for m in messages if m.role in ("user", "tool") for image in m.images)


def shas(images: Iterable[Image]) -> tuple[str, ...]:
    return tuple(image.sha256 for image in images)


@dataclass(frozen=True)
class Processed:
    pixel_values: object  # mx.array (patches, C · temporal patch · patch²)
    grid_thw: tuple[int, int, int]  # patches in time, height, width


class ImageProcessing:
    """The checkpoint's own image processor (Qwen3-VL's, with its resizing bounds), with the last few
    images it processed kept by content. One per thread: processors are not shared across threads."""

    def __init__(self, processor):
        self.processor = getattr(processor, "image_processor", None)
        self._kept: OrderedDict[str, Processed] = OrderedDict()

    def token_count(self, image: Image) -> int:
        """Placeholder tokens the image becomes (the processor's resize, no pixels processed)."""
        return int(self.processor.num_image_tokens(image.height, image.width))

    def process(self, image: Image) -> Processed:
        import mlx.core as mx

        done = self._kept.get(image.sha256)
        if done is None:
            out = self.processor([pil_image(image)])
            done = Processed(mx.array(out["pixel_values"]), tuple(int(n) for n in out["image_grid_thw"][0]))
            self._kept[image.sha256] = done
            while len(self._kept) > PROCESSED_KEPT:
                self._kept.popitem(last=False)
        self._kept.move_to_end(image.sha256)
        return done

    def inputs(self, images: tuple[Image, ...]) -> tuple[object, object]:
        """(pixel values, grid_thw (n, 3)) of ``images``, in order, as the vision tower takes them."""
        import mlx.core as mx

        processed = [self.process(image) for image in images]
        return (mx.concatenate([p.pixel_values for p in processed], axis=0),
                mx.array([p.grid_thw for p in processed], dtype=mx.int32))

    def grids(self, images: tuple[Image, ...]):
        import mlx.core as mx

        return mx.array([self.process(image).grid_thw for image in images], dtype=mx.int32)


def expand_placeholders(ids: list[int], image_token: int, counts: list[int]) -> list[int]:
    """``ids`` with each image's one placeholder repeated as many times as the image has tokens."""
    found = ids.count(image_token)
    if found != len(counts):
        raise EngineError(f"The prompt holds {found} image placeholders for {len(counts)} images (a message's "
                          "text names the image token itself?). Remove it and send again.", code="bad_image")
    out, at = [], iter(counts)
    for token in ids:
        out.extend([token] * next(at) if token == image_token else [token])
    return out


def covered_images(ids: list[int], image_token: int, counts: tuple[int, ...]) -> int | None:
    """How many of the prompt's images ``ids`` (a prefix of it) hold whole; None when it ends inside one."""
    held, whole = ids.count(image_token), 0
    for count in counts:
        if held < count:
            break
        held -= count
        whole += 1
    return whole if held == 0 else None


@dataclass(frozen=True)
class TurnImages:
    """The images a turn's prompt holds, in order, with their placeholder counts, and the processor that
    makes them into the vision tower's inputs."""

    images: tuple[Image, ...]
    counts: tuple[int, ...]
    token: int | None  # the placeholder id
    processing: ImageProcessing | None

    @property
    def shas(self) -> tuple[str, ...]:
        return shas(self.images)

    @property
    def tokens(self) -> int:
        return sum(self.counts)

    def held(self, ids: list[int]) -> int | None:
        """How many of the images ``ids`` (a prefix of the prompt) hold whole; None when it ends inside one."""
        if not self.images:
            return 0
        return covered_images(ids, self.token, self.counts)

    def fits(self, ids: list[int], images: tuple[str, ...]) -> bool:
        """A cache of ``ids`` (a prefix of the prompt), made with ``images``, holds this prompt's own images."""
        whole = self.held(ids)
        return whole is not None and images == self.shas[:whole]

    def after(self, ids: list[int]) -> tuple[Image, ...]:
        """The images past a cache of ``ids`` (one that ``fits``), which the vision tower has yet to see."""
        return self.images[self.held(ids):]
