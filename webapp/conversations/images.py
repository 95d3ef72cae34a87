"""Images attached to messages: checked at the boundary by decoding them with Pillow, never parsed by hand.

An upload becomes an ``Attachment``: the bytes to store, their hash (the id is
derived from it, so the same image uploaded twice is stored once), the type
Pillow read from the content (never the client's word), and the size as the
image is displayed. A JPEG whose EXIF says it is rotated is stored rotated,
so every engine sees it upright, whatever its server does with EXIF.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass

from ..errors import ClientError

MAX_BYTES = 20 * 1024 * 1024
MAX_PIXELS = 40_000_000  # width × height; larger images are refused before they are decoded
MAX_PER_MESSAGE = 8
# Pillow's format names → the type the image is served and sent with.
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif", "BMP": "image/bmp"}
KINDS = "PNG, JPEG, WebP, GIF or BMP"
ID_CHARS = 32  # hex digits of the content's SHA-256 that name it: 128 bits


@dataclass(frozen=True)
class Attachment:
    id: str
    sha256: str
    mime: str
    width: int
    height: int
    data: bytes

    @property
    def bytes(self) -> int:
        return len(self.data)

    def as_image(self):
        """The image as an engine takes it, with a message."""
        from engines import Image

        return Image(self.id, self.sha256, self.mime, self.width, self.height, self.data)

    def to_dict(self) -> dict:
        return {"id": self.id, "sha256": self.sha256, "mime": self.mime, "width": self.width,
                "height": self.height, "bytes": self.bytes}


def too_large(size: int) -> ClientError:
    return ClientError("image_too_large", f"The image is {size / 1048576:.1f} MB; images of up to "
                       f"{MAX_BYTES // 1048576} MB are taken: send a smaller or more compressed one.", status=413)


def read_image(data: bytes, *, normalize: bool = True) -> Attachment:
    """``data`` checked to be a whole image of a supported kind, as an ``Attachment``; ``ClientError``
    (``bad_image`` or ``image_too_large``) saying what to send instead. ``normalize`` turns an EXIF-rotated
    JPEG upright (an import keeps the bytes it was given)."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    if len(data) > MAX_BYTES:
        raise too_large(len(data))
    if not data:
        raise ClientError("bad_image", f"The file is empty: attach a {KINDS} image.")
    try:
        with warnings.catch_warnings():
            # Pillow's decompression-bomb guard stays on, its warning made an error too.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=list(FORMATS))
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise ClientError("image_too_large", f"The image is {width}×{height} pixels; at most "
                                  f"{MAX_PIXELS // 1_000_000} megapixels are taken: scale it down, then attach it.",
                                  status=413)
            kind = image.format
            image.load()  # decodes every byte: a truncated file fails here, not in an engine
            orientation = image.getexif().get(0x0112, 1) if kind == "JPEG" else 1
            if orientation != 1:
                image = ImageOps.exif_transpose(image)
                width, height = image.size
                if normalize:
                    data = _upright_jpeg(image)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ClientError("image_too_large", f"The image decodes to more than {MAX_PIXELS // 1_000_000} "
                          "megapixels: scale it down, then attach it.", status=413) from None
    except UnidentifiedImageError:
        if b"<svg" in data[:4096].lower():
            raise ClientError("bad_image", "SVG images are not supported: export it as PNG, then attach that.") from None
        raise ClientError("bad_image", f"The file is not an image specchat can read: attach a {KINDS} "
                          "image.") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise ClientError("bad_image", f"The image could not be decoded ({exc}): it may be cut short or "
                          f"damaged. Save it again as {KINDS}, then attach it.") from None
    digest = hashlib.sha256(data).hexdigest()
    return Attachment(digest[:ID_CHARS], digest, FORMATS[kind], width, height, data)


def _upright_jpeg(image) -> bytes:
    out = io.BytesIO()
    rgb = image if image.mode in ("RGB", "L", "CMYK") else image.convert("RGB")
    rgb.save(out, format="JPEG", quality=95)
    return out.getvalue()
