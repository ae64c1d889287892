"""ONNX version adapters for the text kernels."""

from __future__ import annotations
