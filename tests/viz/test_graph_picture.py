"""`stdops plot MODEL --graph`: pictures of ONNX, ncnn and MDF graphs (issue 14, item 5), checked by their
structure: the boxes and rows in the SVG, where the links start and end, folding, the size limit."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from stdops import viz
from stdops.viz import diagram, layout
from stdops.viz.fold import fold_repeats

from ..test_cli import one_line_exit_2
from ..test_cli import stdops as cli

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "onnx" / "fixtures" / "resnet_small_opset11.onnx"
RESNET_NCNN = ROOT / "ncnn" / "fixtures" / "resnet_small" / "model.param"
NETWORK = ROOT.parent / "examples" / "mdf" / "network.json"
SVG = "{http://www.w3.org/2000/svg}"


def deep_model(path: Path, blocks: int) -> Path:
    """``blocks`` identical residual blocks (MatMul, Relu, MatMul, Add) and a Softmax head."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for b in range(blocks):
        inits += [
            numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), f"w1_{b}"),
            numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), f"w2_{b}"),
        ]
        nodes += [
            helper.make_node("MatMul", [x, f"w1_{b}"], [f"h{b}"], name=f"block{b}/fc1"),
            helper.make_node("Relu", [f"h{b}"], [f"r{b}"], name=f"block{b}/relu"),
            helper.make_node("MatMul", [f"r{b}", f"w2_{b}"], [f"o{b}"], name=f"block{b}/fc2"),
            helper.make_node("Add", [x, f"o{b}"], [f"y{b}"], name=f"block{b}/residual"),
        ]
        x = f"y{b}"
    nodes.append(helper.make_node("Softmax", [x], ["out"], name="head"))
    g = helper.make_graph(
        nodes,
        "deep",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8])],
        inits,
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def node_groups(svg_path: Path) -> list[ET.Element]:
    root = ET.parse(svg_path).getroot()
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]


def texts(g: ET.Element) -> list[str]:
    return [t.text or "" for t in g.iter(f"{SVG}text")]


def test_onnx_boxes_show_op_types_weights_and_inferred_shapes(tmp_path):
    import onnx

    out = tmp_path / "resnet.svg"
    viz.draw(str(RESNET), str(out))
    m = onnx.load(RESNET)
    groups = node_groups(out)
    ops = [g for g in groups if g.get("data-kind") == "op"]
    assert len(ops) == len(m.graph.node) and len(groups) == len(m.graph.node) + 2  # + the input and output
    assert [g.get("data-op") for g in ops] == [n.op_type for n in m.graph.node]
    inferred = onnx.shape_inference.infer_shapes(m).graph
    shapes = {vi.name: "x".join(str(d.dim_value) for d in vi.type.tensor_type.shape.dim) for vi in inferred.value_info}
    for g, n in zip(ops, m.graph.node):
        rows = texts(g)
        assert rows[0] == n.op_type and rows[1] == n.name
        assert rows[-1] == "→ " + shapes.get(
            n.output[0], "x".join(str(d.dim_value) for d in m.graph.output[0].type.tensor_type.shape.dim)
        )
    stem = texts(ops[0])
    assert "W 16x3x7x7  B 16" in stem and any("kernel_shape=7x7" in t for t in stem)
    # one link per use of a value produced by a node or fed as a graph input (initializers are rows, not links)
    produced = {o for n in m.graph.node for o in n.output} | {vi.name for vi in m.graph.input}
    uses = sum(1 for n in m.graph.node for i in n.input if i in produced) + len(m.graph.output)
    paths = [p for p in ET.parse(out).getroot().iter(f"{SVG}path") if (p.get("class") or "").startswith("edge")]
    assert len(paths) == uses


def test_ncnn_blob_shapes_match_the_onnx_export_of_the_same_network(tmp_path):
    d_ncnn = diagram.build(str(RESNET_NCNN), shapes={"in0": (3, 64, 64)})
    d_onnx = diagram.build(str(RESNET))
    conv_ncnn = [b.rows[-1].text for b in d_ncnn.boxes if b.op == "Convolution"]
    conv_onnx = [b.rows[-1].text.replace("→ 1x", "→ ") for b in d_onnx.boxes if b.op == "Conv"]
    assert len(conv_ncnn) == 12 and sorted(conv_ncnn) == sorted(conv_onnx)
    assert d_ncnn.notes == []
    no_shape = diagram.build(str(RESNET_NCNN))  # the .param declares no input shape: drawn without blob shapes
    assert any("blob shapes not shown" in n for n in no_shape.notes)


def test_mdf_records_show_ports_parameters_and_links_go_port_to_port():
    from stdops.mdf import load

    d = diagram.build(str(NETWORK))
    p = layout.place(d)
    g = load(str(NETWORK)).graph()
    assert [b.rows[0].text for b in d.boxes] == list(g.nodes)
    unit1 = d.boxes[list(g.nodes).index("unit1")]
    rows = [r.text for r in unit1.rows]
    assert "tau = 0.1" in rows and any(r.startswith("dr/dt = (-r + logistic(drive - inhibition") for r in rows)
    assert [r.port for r in unit1.rows if r.side == "in"] == ["drive", "inhibition"]
    assert len(d.links) == len(g.edges)
    for lk, path in zip(d.links, p.paths):
        e = g.edges[lk.value]
        (sx, sy), (ex, ey) = path[0], path[-1]
        src_row = next(j for j, r in enumerate(d.boxes[lk.src].rows) if r.port == e.sender_port and r.side == "out")
        dst_row = next(j for j, r in enumerate(d.boxes[lk.dst].rows) if r.port == e.receiver_port and r.side == "in")
        assert sx == pytest.approx(p.x[lk.src] + p.w[lk.src])  # leaves from the right side of the sender
        assert ex == pytest.approx(p.x[lk.dst])  # arrives at the left side of the receiver
        assert sy == pytest.approx(p.y[lk.src] + diagram.PAD_Y + (src_row + 0.5) * diagram.LINE_H)
        assert ey == pytest.approx(p.y[lk.dst] + diagram.PAD_Y + (dst_row + 0.5) * diagram.LINE_H)
    labels = {lk.value: lk.label for lk in d.links}
    assert labels["unit2_unit1"] == "w=1.5" and labels["drive_unit1"] == ""
    back = [lk.value for lk, b in zip(d.links, p.back) if b]
    assert back == ["unit2_unit1"]  # the one feedback edge of the cycle unit1 -> unit2 -> unit1


def test_layered_layout_keeps_boxes_apart_and_links_downward(tmp_path):
    d = diagram.build(str(ROOT / "onnx" / "fixtures" / "transformer_block_opset17.onnx"))
    p = layout.place(d)
    n = len(d.boxes)
    for i in range(n):
        for j in range(i + 1, n):
            apart = (
                p.x[i] + p.w[i] <= p.x[j]
                or p.x[j] + p.w[j] <= p.x[i]
                or p.y[i] + p.h[i] <= p.y[j]
                or p.y[j] + p.h[j] <= p.y[i]
            )
            assert apart, (d.boxes[i].id, d.boxes[j].id)
    for lk in d.links:  # top to bottom: every value flows down (an ONNX graph has no cycles)
        assert p.y[lk.src] + p.h[lk.src] <= p.y[lk.dst]


def test_repeated_blocks_fold_into_one_box_and_a_frame(tmp_path):
    model = deep_model(tmp_path / "deep.onnx", 60)
    d = diagram.build(str(model))
    assert d.node_count() == 241
    f = fold_repeats(d)
    folds = [b for b in f.boxes if b.kind == "fold"]
    assert len(folds) == 1 and folds[0].rows[0].text == "× 59 more"
    assert len(f.frames) == 1 and f.frames[0].label == "block ×60" and len(f.frames[0].boxes) == 4
    assert len(f.boxes) == 1 + 4 + 1 + 1 + 1  # input, one block, the fold, the head, the output
    out = tmp_path / "deep.svg"
    counts = viz.draw(str(model), str(out))  # auto: folds above FOLD_ABOVE nodes
    assert counts == {"nodes": 241, "boxes": 8, "folds": 1}
    assert len(node_groups(out)) == 8
    r = cli("plot", str(model), "--graph", "--fold", "never", "-o", str(tmp_path / "all.svg"))
    assert r.returncode == 0 and "241 nodes as 243 boxes" in r.stdout, r.stderr


def test_too_large_to_picture_is_one_line_and_nothing_is_written(tmp_path):
    model = deep_model(tmp_path / "deep.onnx", 400)
    out = tmp_path / "all.svg"
    one_line_exit_2(cli("plot", str(model), "--graph", "--fold", "never", "-o", str(out)), "too large to picture")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep.onnx"]


def test_png_is_drawn_with_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    out = tmp_path / "net.png"
    r = cli("plot", str(NETWORK), "--graph", "-o", str(out))
    assert r.returncode == 0, r.stderr
    p = layout.place(diagram.build(str(NETWORK)))
    img = np.asarray(Image.open(out).convert("RGB"))
    assert abs(img.shape[1] - p.width) <= 2 and abs(img.shape[0] - p.height) <= 2
    assert (img.min(axis=2) < 128).mean() > 0.01  # text and lines, not a blank page


def test_plot_cli_refusals(tmp_path):
    xor = str(ROOT.parent / "examples" / "xor_mlp.onnx")
    one_line_exit_2(cli("plot", xor), "MDF", "--graph")
    one_line_exit_2(cli("plot", xor, "--graph", "-o", str(tmp_path / "x.txt")), ".svg")
    one_line_exit_2(cli("plot", xor, "--graph", "--shape", "x=1,2", "-o", str(tmp_path / "x.svg")), "--shape", "NCNN")
    one_line_exit_2(cli("plot", str(NETWORK), "--fold", "never"), "--fold")
    assert list(tmp_path.iterdir()) == []
    r = cli("plot", xor, "--graph", "-o", str(tmp_path / "x.svg"))
    assert r.returncode == 0 and re.search(r"drew 6 nodes as 9 boxes", r.stdout), (r.stdout, r.stderr)
