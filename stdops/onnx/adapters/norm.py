"""ONNX version adapters for the norm kernels."""
from __future__ import annotations
