"""RoI pooling kernels: MaxRoiPool, RoiAlign (split from pool.py)."""
from __future__ import annotations
