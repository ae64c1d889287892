"""ONNX version adapters for the signal kernels."""
from __future__ import annotations
