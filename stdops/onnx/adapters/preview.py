"""ONNX version adapters for the preview kernels."""
from __future__ import annotations
