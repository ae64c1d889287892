"""ONNX version adapters for the quant kernels."""
from __future__ import annotations
