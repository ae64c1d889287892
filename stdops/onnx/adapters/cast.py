"""ONNX version adapters for the cast kernels."""
from __future__ import annotations
