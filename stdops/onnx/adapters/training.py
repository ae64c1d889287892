"""ONNX version adapters for the training kernels."""

from __future__ import annotations
