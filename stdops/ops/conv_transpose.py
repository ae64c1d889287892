"""Transposed and deformable convolution, Col2Im (split from conv.py)."""
from __future__ import annotations
