"""ONNX version adapters for the rnn kernels."""
from __future__ import annotations
