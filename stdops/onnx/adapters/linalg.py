"""ONNX version adapters for the linalg kernels."""
from __future__ import annotations
