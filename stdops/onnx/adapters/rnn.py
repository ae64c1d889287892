"""ONNX version adapters for the rnn kernels.

RNN-1, GRU-1, GRU-3 and LSTM-1 carry ``output_sequence`` (whether Y is produced: the front end
drops outputs a node does not name, so it changes nothing here). GRU-1's schema spells its
default direction ``"foward"``; that spelling is read as ``"forward"``. GRU-1 has no
``linear_before_reset`` (0, the kernel's default). Versions 7..13 lack ``layout`` (0, the default).
"""

from __future__ import annotations

from ..opset import adapter


@adapter("RNN", 1)
@adapter("GRU", 1, 3)
@adapter("LSTM", 1)
def _output_sequence_attr(ctx):
    ctx.attrs.pop("output_sequence", None)
    if ctx.attrs.get("direction") == "foward":
        ctx.attrs["direction"] = "forward"
    return ctx.bind()
