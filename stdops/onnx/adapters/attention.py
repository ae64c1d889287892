"""ONNX version adapters for the attention kernels."""
from __future__ import annotations
