"""Cognitive-science functions of the MDF standard: ACT-R and drift diffusion."""

from . import actr, ddm  # noqa: F401
