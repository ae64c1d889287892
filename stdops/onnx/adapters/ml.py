"""ONNX version adapters for the ml kernels."""
from __future__ import annotations
