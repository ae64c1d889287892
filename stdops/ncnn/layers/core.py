"""Graph plumbing layers: Input, Split, Noop."""

from __future__ import annotations

from ..spec import P, layer

_PLUMBING = "graph plumbing, no computation: it names or passes on blobs"


@layer(
    "Input",
    params=[P(0, "w", 0), P(1, "h", 0), P(11, "d", 0), P(2, "c", 0)],
    inputs=0,
    outputs=None,
    ncnn_only=_PLUMBING,
)
def input_layer(p, w):
    """Declares input blobs (its tops); the shape params are hints. In a net its tops are the fed blobs;
    run alone (as ncnn's Input::forward_inplace) it passes its blob through."""
    return lambda *xs: xs[0] if len(xs) == 1 else tuple(xs)


@layer("Split", outputs=None, ncnn_only=_PLUMBING)
def split(p, w):
    """Every top is the bottom (one blob, several consumers)."""
    n = p.n_tops
    return lambda x: (x,) * n


@layer("Noop", inputs=None, outputs=None, ncnn_only=_PLUMBING)
def noop(p, w):
    """Passes its bottoms through as its tops."""
    return lambda *xs: tuple(xs)
