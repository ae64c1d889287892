"""Image decoding (ONNX ImageDecoder), through Pillow, an optional dependency (the `images` extra)."""

from __future__ import annotations

import io
import warnings

import numpy as np

from .. import limits
from ..errors import KernelError
from ._registry import op


@op("onnx:ImageDecoder-20")
def image_decoder(encoded_stream, /, *, pixel_format="RGB"):
    """image = decode(encoded_stream): BMP, JPEG, JPEG2000, TIFF, PNG, WebP, PNM.

    ``encoded_stream`` is a 1-D uint8 tensor holding the file's bytes; the result is uint8 in channel-last
    layout (H, W, 3) for RGB / BGR and (H, W, 1) for Grayscale. A stream that cannot be decoded gives an
    empty (0, 0, C) tensor, as the spec says. The decoded size goes through the allocation limit first.
    """
    if pixel_format not in ("RGB", "BGR", "Grayscale"):
        raise KernelError(f"ImageDecoder: pixel_format must be RGB, BGR or Grayscale, got {pixel_format!r}")
    channels = 1 if pixel_format == "Grayscale" else 3
    try:
        from PIL import Image
    except ImportError:
        raise KernelError("ImageDecoder needs Pillow (pip install 'stdops[images]')") from None
    data = np.asarray(encoded_stream, dtype=np.uint8).tobytes()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            limits.check_elements((img.size[1], img.size[0], channels), "ImageDecoder output")
            img = img.convert("L" if channels == 1 else "RGB")
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombWarning, Image.DecompressionBombError):
        return np.zeros((0, 0, channels), np.uint8)
    arr = np.asarray(img, dtype=np.uint8)
    if channels == 1:
        return np.ascontiguousarray(arr[:, :, None])
    return np.ascontiguousarray(arr[:, :, ::-1]) if pixel_format == "BGR" else arr
