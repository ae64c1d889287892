"""The ai.onnx.preview.training Gradient operator (being written)."""
from __future__ import annotations
