"""ONNX version adapters for the recent kernels."""

from __future__ import annotations
