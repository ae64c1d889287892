"""ONNX version adapters for the loss kernels."""

from __future__ import annotations
