"""modeci-mdf's PyTorch, ONNX and Keras interfaces for the MDF producers' corpus (run inside .venv-mdf-prod by
make_mdf_corpus.py).

The networks are hand-made in the shape of the torchvision families the interfaces are shown on (VGG, ResNet,
ResNeXt, MobileNetV2, MNASNet, SqueezeNet, ShuffleNet, Inception), small, with seeded random weights, in eval
mode, BatchNorm folded into the convolutions (modeci-mdf 0.4.15's onnx::BatchNormalization wrapper needs a
training_mode argument that current exporters do not write). Per model the corpus holds:

- ``<name>.json``: the MDF file as the interface wrote it;
- ``<name>.npz``: ``in:<port>`` the values the run feeds (the network input and, for PyTorch and ONNX, the
  weights: those interfaces make them graph inputs), ``out:<node>.<port>`` the expected output values;
- ``<name>.expected.json``: where the expected values come from. They are modeci-mdf's own results (its
  EvaluableGraph on the exported model), except where modeci-mdf cannot run its own export (``source``
  says so): then the producer framework's output (torch / onnxruntime / keras) is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings

import numpy as np

SEED = 0


def _torch_compat():
    """modeci-mdf 0.4.15's PyTorch interface imports two private names that torch 2.9 moved into
    torch.onnx._internal.torchscript_exporter: alias them where it looks."""
    import torch.onnx.utils as u

    try:
        from torch.onnx._internal.torchscript_exporter import _globals
        from torch.onnx._internal.torchscript_exporter import utils as tsu
    except ImportError:
        return
    if not hasattr(u, "_model_to_graph"):
        u._model_to_graph = tsu._model_to_graph
    sys.modules.setdefault("torch.onnx._globals", _globals)


# ---------------------------------------------------------------------------------------------------------------
# the networks


def torch_models() -> dict:
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    def conv_bn(cin, cout, k, stride=1, groups=1):
        """A convolution with a BatchNorm of random statistics folded into it (eval mode)."""
        conv = nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups, bias=False)
        bn = nn.BatchNorm2d(cout)
        with torch.no_grad():
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 1.5)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
        return torch.nn.utils.fusion.fuse_conv_bn_eval(conv.eval(), bn.eval())

    class VGG(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.c3 = (
                nn.Conv2d(3, 8, 3, padding=1),
                nn.Conv2d(8, 8, 3, padding=1),
                nn.Conv2d(8, 16, 3, padding=1),
            )
            self.fc1, self.fc2 = nn.Linear(16 * 4 * 4, 32), nn.Linear(32, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 2)
            x = F.max_pool2d(F.relu(self.c3(x)), 2)
            return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))

    class ResNet(nn.Module):
        def __init__(self, groups=1):
            super().__init__()
            self.stem = conv_bn(3, 16, 3)
            self.a, self.b = conv_bn(16, 16, 3, groups=groups), conv_bn(16, 16, 3, groups=groups)
            self.down, self.proj = conv_bn(16, 32, 3, stride=2), conv_bn(16, 32, 1, stride=2)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = F.relu(self.stem(x))
            x = F.relu(x + self.b(F.relu(self.a(x))))
            x = F.relu(self.down(x) + self.proj(x))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    class MobileNetV2(nn.Module):
        def __init__(self, k=3):
            super().__init__()
            self.stem = conv_bn(3, 8, 3, stride=2)
            self.expand, self.dw, self.project = conv_bn(8, 32, 1), conv_bn(32, 32, k, groups=32), conv_bn(32, 8, 1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            x = F.relu6(self.stem(x))
            x = x + self.project(F.relu6(self.dw(F.relu6(self.expand(x)))))
            return self.fc(x.mean([2, 3]))

    class SqueezeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, stride=2)
            self.squeeze, self.e1, self.e3 = nn.Conv2d(16, 4, 1), nn.Conv2d(4, 8, 1), nn.Conv2d(4, 8, 3, padding=1)
            self.cls = nn.Conv2d(16, 10, 1)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.stem(x)), 3, stride=2, ceil_mode=True)
            s = F.relu(self.squeeze(x))
            x = torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)
            return torch.flatten(F.adaptive_avg_pool2d(F.relu(self.cls(x)), 1), 1)

    class ShuffleNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = conv_bn(3, 16, 3, stride=2)
            self.pw1, self.dw, self.pw2 = conv_bn(8, 8, 1), conv_bn(8, 8, 3, groups=8), conv_bn(8, 8, 1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            # halves by slicing and a channel shuffle with fixed sizes: x.chunk() is exported as a Split
            # whose two output ports both read the whole tuple (modeci-mdf cannot run that export either)
            x = F.relu(self.stem(x))
            a, b = x[:, :8], x[:, 8:]
            x = torch.cat([a, F.relu(self.pw2(self.dw(F.relu(self.pw1(b)))))], 1)
            x = x.reshape(2, 2, 8, 8, 8).transpose(1, 2).reshape(2, 16, 8, 8)  # channel shuffle
            return self.fc(x.mean([2, 3]))

    class Inception(nn.Module):
        def __init__(self):
            super().__init__()
            self.b1 = nn.Conv2d(3, 4, 1)
            self.b3a, self.b3b = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 6, 3, padding=1)
            self.b5a, self.b5b = nn.Conv2d(3, 2, 1), nn.Conv2d(2, 4, 5, padding=2)
            self.bp = nn.Conv2d(3, 2, 1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = torch.cat(
                [
                    F.relu(self.b1(x)),
                    F.relu(self.b3b(F.relu(self.b3a(x)))),
                    F.relu(self.b5b(F.relu(self.b5a(x)))),
                    F.relu(self.bp(F.max_pool2d(x, 3, stride=1, padding=1))),
                ],
                1,
            )
            y = F.avg_pool2d(y, 2)
            return F.softmax(self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)), dim=1)

    class Padded(nn.Module):
        """F.pad with mode='constant': a Pad node whose string attribute is a value."""

        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            return torch.sigmoid(self.c(F.pad(x, (1, 2, 1, 0), mode="constant", value=0.5)))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(12, 24), nn.Linear(24, 16), nn.Linear(16, 4)

        def forward(self, x):
            return F.log_softmax(self.l3(torch.tanh(self.l2(F.elu(self.l1(x))))), dim=1)

    torch.manual_seed(SEED)
    img = (2, 3, 16, 16)
    return {
        "torch_vgg": (VGG(), img),
        "torch_resnet": (ResNet(), img),
        "torch_resnext": (ResNet(groups=4), img),
        "torch_mobilenetv2": (MobileNetV2(), img),
        "torch_mnasnet": (MobileNetV2(k=5), img),
        "torch_squeezenet": (SqueezeNet(), img),
        "torch_shufflenet": (ShuffleNet(), img),
        "torch_inception": (Inception(), img),
        "torch_pad_constant": (Padded(), (1, 3, 6, 6)),
        "torch_mlp": (MLP(), (3, 12)),
    }


def onnx_models() -> dict:
    """ONNX graphs written with onnx.helper: a Loop whose body uses GreaterOrEqual, an If, a Pad and a Gemm
    with float32 weights beside float64 JSON values."""
    import onnx
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(SEED)
    out = {}

    # a Loop: y = x; repeat y = y * 0.5 + 1 while (iteration + 1) < limit; the body's condition uses
    # GreaterOrEqual
    body = h.make_graph(
        [
            h.make_node("Constant", [], ["half"], value=nh.from_array(np.array(0.5, np.float32))),
            h.make_node("Constant", [], ["one"], value=nh.from_array(np.array(1.0, np.float32))),
            h.make_node("Mul", ["y_in", "half"], ["y_half"]),
            h.make_node("Add", ["y_half", "one"], ["y_out"]),
            h.make_node("Constant", [], ["one_i"], value=nh.from_array(np.array(1, np.int64))),
            h.make_node("Add", ["iter", "one_i"], ["next_iter"]),
            h.make_node("GreaterOrEqual", ["next_iter", "limit"], ["done"]),
            h.make_node("Not", ["done"], ["cond_out"]),
        ],
        "loop_body",
        [
            h.make_tensor_value_info("iter", TP.INT64, []),
            h.make_tensor_value_info("cond_in", TP.BOOL, []),
            h.make_tensor_value_info("y_in", TP.FLOAT, [2, 3]),
        ],
        [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_value_info("y_out", TP.FLOAT, [2, 3])],
    )
    g = h.make_graph(
        [
            h.make_node("Constant", [], ["trip"], value=nh.from_array(np.array(10, np.int64))),
            h.make_node("Constant", [], ["cond0"], value=nh.from_array(np.array(True))),
            h.make_node("Loop", ["trip", "cond0", "x"], ["y"], body=body),
        ],
        "loop_graph",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 3]), h.make_tensor_value_info("limit", TP.INT64, [])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
    )
    out["onnx_loop_greater_or_equal"] = (
        h.make_model(g, opset_imports=[h.make_opsetid("", 13)]),
        {"x": rng.standard_normal((2, 3)).astype(np.float32), "limit": np.array(4, np.int64)},
    )

    w = rng.standard_normal((9, 4)).astype(np.float32)  # Gemm's B for xf (2, 9)
    b = rng.standard_normal(4).astype(np.float32)
    g = h.make_graph(
        [
            # no mode attribute: onnx_to_mdf writes string attributes as bytes, which its JSON writer refuses
            h.make_node("Pad", ["x", "pads", "pad_value"], ["xp"]),
            h.make_node("Reshape", ["xp", "shape"], ["xf"]),
            h.make_node("Gemm", ["xf", "w", "b"], ["g"], alpha=0.5, beta=2.0),
            h.make_node("Relu", ["g"], ["y"]),
        ],
        "pad_gemm",
        [h.make_tensor_value_info("x", TP.FLOAT, [3, 4])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 4])],
        initializer=[
            nh.from_array(np.array([0, 1, 0, 1], np.int64), "pads"),
            nh.from_array(np.array(0.25, np.float32), "pad_value"),
            nh.from_array(np.array([2, 9], np.int64), "shape"),
            nh.from_array(w, "w"),
            nh.from_array(b, "b"),
        ],
    )
    out["onnx_pad_gemm"] = (
        h.make_model(g, opset_imports=[h.make_opsetid("", 13)]),
        {"x": rng.standard_normal((3, 4)).astype(np.float32)},
    )

    then_g = h.make_graph(
        [h.make_node("Mul", ["x", "x"], ["t"])], "then", [], [h.make_tensor_value_info("t", TP.FLOAT, [4])]
    )
    else_g = h.make_graph(
        [h.make_node("Neg", ["x"], ["e"])], "else", [], [h.make_tensor_value_info("e", TP.FLOAT, [4])]
    )
    g = h.make_graph(
        [
            h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            h.make_node("Constant", [], ["zero"], value=nh.from_array(np.array(0.0, np.float32))),
            h.make_node("Greater", ["s", "zero"], ["pos"]),
            h.make_node("If", ["pos"], ["y"], then_branch=then_g, else_branch=else_g),
        ],
        "if_graph",
        [h.make_tensor_value_info("x", TP.FLOAT, [4])],
        [h.make_tensor_value_info("y", TP.FLOAT, [4])],
    )
    out["onnx_if"] = (
        h.make_model(g, opset_imports=[h.make_opsetid("", 13)]),
        {"x": np.array([0.5, -0.25, 1.0, 0.125], np.float32)},
    )
    for m, _ in out.values():
        _name_nodes(m.graph, m.graph.name)
        onnx.checker.check_model(m)
    return out


def _name_nodes(graph, prefix: str) -> None:
    """Exporters name every node (onnx_to_mdf makes MDF node ids of the names); so do we."""
    for i, node in enumerate(graph.node):
        if not node.name:
            node.name = f"{prefix}_{node.op_type}_{i}"
        for a in node.attribute:
            if a.type == a.GRAPH:
                _name_nodes(a.g, f"{node.name}_{a.name}")


def keras_models() -> dict:
    import keras
    from keras import layers

    keras.utils.set_random_seed(SEED)
    dense = keras.Sequential(
        [
            keras.Input((8,)),
            layers.Dense(16, activation="relu"),
            layers.Dense(12, activation="relu"),  # keras_to_mdf writes relu, sigmoid and softmax only
            layers.Dense(3, activation="softmax"),
        ],
        name="keras_dense",
    )
    conv = keras.Sequential(
        [
            keras.Input((10, 10, 3)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(5, activation="softmax"),
        ],
        name="keras_conv",
    )
    rng = np.random.default_rng(SEED)
    return {
        "keras_dense": (dense, rng.standard_normal((2, 8)).astype(np.float32)),
        "keras_conv": (conv, rng.standard_normal((1, 10, 10, 3)).astype(np.float32)),
    }


# ---------------------------------------------------------------------------------------------------------------
# running the reference and writing the corpus


def _reference_outputs(mdf_model, initializer: dict) -> dict:
    """modeci-mdf's EvaluableGraph on the exported model -> {node.port: value} of its output nodes."""
    from modeci_mdf.execution_engine import EvaluableGraph

    graph = mdf_model.graphs[0]
    eg = EvaluableGraph(graph, verbose=False)
    eg.evaluate(initializer=initializer)
    senders = {e.sender for e in graph.edges}
    out = {}
    for node in graph.nodes:
        if node.id in senders:
            continue
        for op in node.output_ports:
            out[f"{node.id}.{op.id}"] = np.asarray(eg.enodes[node.id].evaluable_outputs[op.id].curr_value)
    return out


def _write(out_dir: str, name: str, mdf_model, feeds: dict, outputs: dict, info: dict) -> None:
    path = os.path.join(out_dir, f"{name}.json")
    mdf_model.to_json_file(path)
    arrays = {f"in:{k}": np.asarray(v) for k, v in feeds.items()}
    arrays.update({f"out:{k}": np.asarray(v) for k, v in outputs.items()})
    np.savez_compressed(os.path.join(out_dir, f"{name}.npz"), **arrays)
    with open(path, "rb") as f:
        info["sha256"] = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(out_dir, f"{name}.expected.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"mdf {name}: {info['source']}", flush=True)


def _framework_outputs(mdf_model, value, port: str | None = None) -> dict:
    """{node.port: value} for the graph's output: the node sending no edge, or the one whose output port is
    ``port`` (the ONNX graph output's name)."""
    graph = mdf_model.graphs[0]
    senders = {e.sender for e in graph.edges}
    if port is not None:
        ends = [(n.id, op.id) for n in graph.nodes for op in n.output_ports if op.id == port]
    else:
        ends = [(n.id, n.output_ports[0].id) for n in graph.nodes if n.id not in senders and n.output_ports]
    if len(ends) != 1:
        raise RuntimeError(f"expected one output node, found {ends}")
    return {f"{ends[0][0]}.{ends[0][1]}": np.asarray(value)}


def run(names, out_dir: str, tensorflow: bool = True) -> int:
    import modeci_mdf

    out_dir = os.path.join(out_dir, "modeci_mdf")
    os.makedirs(out_dir, exist_ok=True)
    version = f"modeci-mdf {modeci_mdf.__version__}"
    warnings.simplefilter("ignore")
    rc = 0

    _torch_compat()
    import torch
    from modeci_mdf.interfaces.pytorch import pytorch_to_mdf

    for name, (model, shape) in torch_models().items():
        if names and name not in names:
            continue
        model.eval()
        x = torch.rand(shape, generator=torch.Generator().manual_seed(SEED))
        with torch.no_grad():
            want = model(x).numpy()
        mdf_model, params = pytorch_to_mdf(model=model, args=(x,), trace=True)
        feeds = {"input1": x.numpy(), **{k: v.detach().numpy() for k, v in params.items()}}
        info = {"producer": f"{version} pytorch_to_mdf (torch {torch.__version__})", "interface": "pytorch"}
        try:
            outputs = _reference_outputs(mdf_model, dict(feeds))
            info["source"] = f"{version} EvaluableGraph"
            (ref,) = outputs.values()
            info["reference_vs_torch_max_abs_diff"] = float(np.max(np.abs(ref - want)))
        except Exception as e:  # noqa: BLE001 - the reference cannot run its own export
            outputs = _framework_outputs(mdf_model, want)
            info["source"] = f"torch (modeci-mdf fails: {type(e).__name__}: {str(e)[:200]})"
        _write(out_dir, name, mdf_model, feeds, outputs, info)

    import onnx
    import onnxruntime as ort
    from modeci_mdf.interfaces.onnx import onnx_to_mdf

    for name, (model, feeds) in onnx_models().items():
        if names and name not in names:
            continue
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)[0]
        mdf_model = onnx_to_mdf(model)
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
        all_feeds = {**feeds, **inits}
        info = {"producer": f"{version} onnx_to_mdf (onnx {onnx.__version__})", "interface": "onnx"}
        try:
            outputs = _reference_outputs(mdf_model, dict(all_feeds))
            info["source"] = f"{version} EvaluableGraph"
            (ref,) = outputs.values()
            info["reference_vs_onnxruntime_max_abs_diff"] = float(np.max(np.abs(np.asarray(ref) - want)))
        except Exception as e:  # noqa: BLE001
            outputs = _framework_outputs(mdf_model, want, model.graph.output[0].name)
            info["source"] = f"onnxruntime {ort.__version__} (modeci-mdf fails: {type(e).__name__}: {str(e)[:200]})"
        _write(out_dir, name, mdf_model, all_feeds, outputs, info)

    if tensorflow:
        try:
            import keras
            from modeci_mdf.interfaces.keras import keras_to_mdf
        except Exception as e:  # noqa: BLE001
            print(f"keras interface unavailable: {type(e).__name__}: {e}", flush=True)
            return 1
        for name, (model, x) in keras_models().items():
            if names and name not in names:
                continue
            want = np.asarray(model(x))
            info = {"producer": f"{version} keras_to_mdf (keras {keras.__version__})", "interface": "keras"}
            try:
                mdf_model, params = keras_to_mdf(model=model, args=x)
            except Exception as e:  # noqa: BLE001 - record what the interface cannot export
                print(f"mdf {name}: keras_to_mdf fails: {type(e).__name__}: {str(e)[:300]}", flush=True)
                rc = 1
                continue
            feeds = {}  # keras_to_mdf writes the input and the weights into the file (params: the same weights)
            try:
                outputs = _reference_outputs(mdf_model, dict(feeds))
                info["source"] = f"{version} EvaluableGraph"
                (ref,) = outputs.values()
                info["reference_vs_keras_max_abs_diff"] = float(np.max(np.abs(np.asarray(ref) - want)))
            except Exception as e:  # noqa: BLE001
                outputs = _framework_outputs(mdf_model, want)
                info["source"] = f"keras (modeci-mdf fails: {type(e).__name__}: {str(e)[:200]})"
            _write(out_dir, name, mdf_model, feeds, outputs, info)
    return rc
