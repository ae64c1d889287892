"""ONNX version adapters for the resize kernels."""
from __future__ import annotations
