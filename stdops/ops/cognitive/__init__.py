"""Cognitive-science functions: ACT-R and drift diffusion (MDF standard), PsyNeuLink's function library."""

from . import actr, ddm, psyneulink  # noqa: F401
