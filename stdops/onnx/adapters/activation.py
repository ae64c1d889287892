"""ONNX version adapters for the activation kernels."""
from __future__ import annotations
