"""ONNX version adapters for the elementwise kernels."""
from __future__ import annotations
