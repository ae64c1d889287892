"""ONNX version adapters for the conv kernels."""
from __future__ import annotations
