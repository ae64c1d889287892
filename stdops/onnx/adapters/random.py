"""ONNX version adapters for the random kernels."""
from __future__ import annotations
