"""ImageDecoder through Pillow: lossless formats decode exactly, bad streams give an empty tensor."""

from __future__ import annotations

import io

import numpy as np
import pytest

from stdops import limits
from stdops.errors import KernelError, ResourceLimitError
from stdops.ops import OPS

PIL = pytest.importorskip("PIL.Image")
decode = OPS["image_decoder"].fn


def _encoded(img: np.ndarray, fmt: str) -> np.ndarray:
    buf = io.BytesIO()
    PIL.fromarray(img).save(buf, format=fmt)
    return np.frombuffer(buf.getvalue(), np.uint8)


IMG = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "TIFF", "PPM"])
def test_lossless_formats_round_trip(fmt):
    out = decode(_encoded(IMG, fmt))
    assert out.dtype == np.uint8 and out.shape == (5, 7, 3)
    np.testing.assert_array_equal(out, IMG)
    np.testing.assert_array_equal(decode(_encoded(IMG, fmt), pixel_format="BGR"), IMG[:, :, ::-1])


def test_grayscale_uses_luma():
    out = decode(_encoded(IMG, "PNG"), pixel_format="Grayscale")
    assert out.shape == (5, 7, 1)
    rgb = IMG.astype(np.int64)
    luma = (rgb[..., 0] * 299 + rgb[..., 1] * 587 + rgb[..., 2] * 114 + 500) // 1000
    assert np.abs(out[..., 0].astype(int) - luma).max() <= 1


def test_corrupt_stream_is_empty_and_bad_format_refused():
    assert decode(np.frombuffer(b"not an image at all", np.uint8)).shape == (0, 0, 3)
    with pytest.raises(KernelError, match="pixel_format"):
        decode(_encoded(IMG, "PNG"), pixel_format="CMYK")


def test_decoded_size_respects_the_allocation_limit():
    old = limits.set_max_elements(50)
    try:
        with pytest.raises(ResourceLimitError, match="ImageDecoder"):
            decode(_encoded(IMG, "PNG"))
    finally:
        limits.set_max_elements(old)
