"""ONNX version adapters for the pool kernels."""
from __future__ import annotations
