"""ONNX version adapters for the detection kernels."""

from __future__ import annotations
