"""The ``stdops`` command line: run, info, ops, demo.

A ``StdopsError`` (the user's input is at fault) prints one line and exits with status 2; ``--debug``
shows the traceback instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .errors import StdopsError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="stdops: run ONNX, ncnn and MDF models on one exact NumPy operator library.",
)
console = Console()
_state = {"debug": False}


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    _state["debug"] = debug


def _summary(v) -> str:
    if v is None:
        return "empty optional"
    if isinstance(v, list):
        return f"sequence of {len(v)}"
    a = np.asarray(v)
    if a.size == 0:
        return "empty"
    if a.dtype.kind in "fc" or a.dtype.kind in "iub":
        x = a.astype(np.float64) if a.dtype.kind != "c" else np.abs(a)
        return f"min {x.min():.6g}  max {x.max():.6g}  mean {x.mean():.6g}"
    flat = a.ravel()
    return ", ".join(map(str, flat[:4])) + (" ..." if flat.size > 4 else "")


def _parse_inputs(items: list[str]) -> dict:
    feeds = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name or not file:
            raise StdopsError(f"--input {item!r}: expected NAME=FILE.npy")
        try:
            feeds[name] = np.load(file, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise StdopsError(f"--input {item!r}: cannot read {file}: {e}") from None
    return feeds


@app.command()
def run(
    model: Path = typer.Argument(..., help="Model file: .onnx, .param / .param.bin (ncnn)"),
    weights: Path | None = typer.Argument(None, help="ncnn .bin (default: beside the .param)"),
    input: list[str] = typer.Option([], "--input", "-i", help="NAME=FILE.npy (repeatable)"),
    output_dir: Path | None = typer.Option(None, "--output-dir", "-o", help="Save every output as NAME.npy here"),
    dump: Path | None = typer.Option(None, "--dump", help="Save EVERY intermediate value as NAME.npy here"),
    duration: float | None = typer.Option(None, "--duration", help="MDF: simulated time to run"),
    dt: float | None = typer.Option(None, "--dt", help="MDF: time step"),
    out: Path | None = typer.Option(None, "--out", help="MDF: save the trajectory (.csv or .npz)"),
    seed: int | None = typer.Option(None, "--seed", help="MDF: random seed"),
) -> None:
    """Run a model: ONNX / ncnn on inputs from .npy files (print each output's shape, dtype and summary);
    MDF for a duration with a time step (a progress bar, a table of outputs, the trajectory to a file)."""
    from . import model_kind

    if model_kind(model) == "mdf":
        from .mdf import cli as mdf_cli

        mdf_cli.run_model(model, duration, dt, out, seed=seed, inputs=_parse_inputs(input) or None)
        return
    m = _load(model, weights)
    feeds = _parse_inputs(input)
    hook = None
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)

        def hook(node: str, name: str, value) -> None:
            if isinstance(value, np.ndarray) and value.dtype != object:
                # values inside a subgraph (node "loop[3]/add") repeat per iteration: keep them apart
                stem = f"{_safe(node)}__{_safe(name)}" if "/" in node else _safe(name)
                np.save(dump / f"{stem}.npy", value, allow_pickle=False)

    result = m.run(feeds, hook=hook)
    _print_outputs(result)
    if dump is not None:
        console.print(f"saved every intermediate value to {dump}")
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        for name, v in result.items():
            if isinstance(v, np.ndarray) and v.dtype != object:
                np.save(output_dir / f"{_safe(name)}.npy", v, allow_pickle=False)
        console.print(f"saved {len(result)} output(s) to {output_dir}")


def _load(model: Path, weights: Path | None = None):
    from . import load

    if weights is not None:
        from . import ncnn

        return ncnn.Net.load(model, weights)
    return load(model)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _print_outputs(result: dict) -> None:
    t = Table(title="outputs")
    for col in ("name", "shape", "dtype", "summary"):
        t.add_column(col)
    for name, v in result.items():
        shape = str(tuple(np.shape(v))) if isinstance(v, np.ndarray) else "-"
        dtype = str(v.dtype) if isinstance(v, np.ndarray) else type(v).__name__
        t.add_row(escape(name), shape, dtype, escape(_summary(v)))
    console.print(t)


@app.command()
def info(
    model: Path = typer.Argument(..., help="Model file: .onnx, .param / .param.bin (ncnn)"),
    weights: Path | None = typer.Argument(None, help="ncnn .bin (default: beside the .param)"),
) -> None:
    """Inputs, outputs, operators (layers) and parameters of a model (MDF: graphs, nodes, functions,
    conditions)."""
    from . import model_kind

    if model_kind(model) == "mdf":
        from .mdf import cli as mdf_cli

        mdf_cli.info(model)
        return
    m = _load(model, weights)
    from .ncnn import Net

    if isinstance(m, Net):
        _info_ncnn(model, m)
    else:
        _info_onnx(model, m)


def _histogram_table(title: str, hist: dict) -> Table:
    t = Table(title=title)
    t.add_column("type")
    t.add_column("count", justify="right")
    for op, n in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        t.add_row(escape(op), str(n))
    return t


def _info_onnx(model: Path, m) -> None:
    console.print(f"[bold]{escape(str(model))}[/bold]")
    console.print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in m.opsets.items()))
    for title, vals in (("inputs", m.inputs), ("outputs", m.outputs)):
        console.print(f"{title}:")
        for v in vals:
            console.print(f"  {escape(str(v))}")
    console.print(f"parameters: {m.parameter_count():,}")
    console.print(_histogram_table("operators", m.op_histogram()))


def _info_ncnn(model: Path, net) -> None:
    console.print(
        f"[bold]{escape(str(model))}[/bold] ({'binary' if net.param_file.binary else 'text'} .param"
        f"{', weights ' + escape(str(net.bin_path)) if net.bin_path else ', no .bin'})"
    )
    console.print(f"layers: {len(net.layers)}; blobs: {len(net.blob_names)}")
    console.print("inputs: " + ", ".join(map(escape, net.input_names)))
    console.print("outputs: " + ", ".join(map(escape, net.output_names)))
    hist: dict = {}
    for L in net.layers:
        hist[L.type] = hist.get(L.type, 0) + 1
    console.print(_histogram_table("layers", hist))
    if net.weight_storage:
        console.print(
            "weight bytes by storage type: " + ", ".join(f"{k} {v:,}" for k, v in sorted(net.weight_storage.items()))
        )


@app.command()
def plot(
    model: Path = typer.Argument(..., help="MDF model file (.json, .yaml)"),
    duration: float | None = typer.Option(None, "--duration", help="Simulated time to run"),
    dt: float | None = typer.Option(None, "--dt", help="Time step"),
    output: Path = typer.Option(Path("plot.png"), "--output", "-o", help="Image file to write"),
    graph: bool = typer.Option(False, "--graph", help="Draw the nodes and edges instead"),
) -> None:
    """Plot every output port of an MDF model over time, or (--graph) its nodes and edges."""
    from .mdf import cli as mdf_cli

    mdf_cli.plot(model, duration, dt, output, graph)


@app.command()
def compare(
    model: Path = typer.Argument(..., help="Model file: .onnx, .param / .param.bin (ncnn)"),
    weights: Path | None = typer.Argument(None, help="ncnn .bin (default: beside the .param)"),
    input: list[str] = typer.Option([], "--input", "-i", help="NAME=FILE.npy (repeatable)"),
    atol: float = typer.Option(1e-4, help="absolute tolerance"),
    rtol: float = typer.Option(1e-4, help="tolerance relative to the value's magnitude"),
    wheel_defaults: bool = typer.Option(
        False,
        "--wheel-defaults",
        help="ncnn: the wheel's default options (fp16 storage, Winograd) instead of exact fp32",
    ),
    show: int = typer.Option(40, help="rows to show around the first disagreement"),
) -> None:
    """Run the model in stdops and in its peer runtime (onnxruntime for ONNX, the ncnn wheel for ncnn),
    compare every intermediate value, and name the first node that disagrees."""
    from . import compare as cmp
    from . import model_kind

    feeds = _parse_inputs(input)
    kind = model_kind(model)
    if kind == "onnx":
        diffs = cmp.compare_onnx(str(model), feeds)
        peer = "onnxruntime"
    elif kind == "ncnn":
        diffs = cmp.compare_ncnn(str(model), str(weights) if weights else None, feeds, exact=not wheel_defaults)
        peer = "ncnn wheel" + (" (default options)" if wheel_defaults else " (exact fp32)")
    else:
        raise StdopsError(f"{model}: compare works on ONNX and ncnn models")
    first = cmp.first_disagreement(diffs, atol, rtol)
    start = 0 if first is None else max(0, diffs.index(first) - show // 2)
    t = Table(title=f"stdops vs {peer}: {len(diffs)} values")
    for col in ("node", "op", "value", "shape", "max |diff|", "max rel"):
        t.add_column(col)
    for d in diffs[start : start + show]:
        style = "bold red" if d is first else ("" if d.ok(atol, rtol) else "red")
        t.add_row(
            escape(d.node),
            escape(d.op),
            escape(d.name),
            str(d.shape),
            d.note or f"{d.max_abs:.3g}",
            "" if d.note else f"{d.max_rel:.3g}",
            style=style,
        )
    console.print(t)
    if first is None:
        console.print(f"[green]all {len(diffs)} values agree[/green] within atol {atol:g} + rtol {rtol:g}")
    else:
        bad = sum(not d.ok(atol, rtol) for d in diffs)
        console.print(
            f"[red]first disagreement[/red]: node {escape(first.node)!r} ({escape(first.op)}), value "
            f"{escape(first.name)!r}: {first.note or f'max |diff| {first.max_abs:.3g}'}; "
            f"{bad} of {len(diffs)} values outside tolerance"
        )
        raise typer.Exit(1)


@app.command()
def ops(
    front_end: str | None = typer.Option(
        None, "--front-end", "-f", help="Only what this front end binds (onnx, ncnn, mdf)"
    ),
    layer: str | None = typer.Option(None, "--layer", help="ncnn: one layer's params and weights"),
) -> None:
    """Every registered kernel, what it implements and which front ends bind it; with -f ncnn, the ncnn
    layers with their param ids, names and defaults (the operator reference ncnn lacks)."""
    from .ncnn.spec import LAYERS
    from .onnx import opset  # noqa: F401  (loads the ONNX adapters too)
    from .ops import OPS

    if front_end == "ncnn" or layer:
        _ncnn_layers(LAYERS, layer)
        return
    t = Table(title="stdops kernels")
    for col in ("kernel", "front ends", "specs", "summary"):
        t.add_column(col, overflow="fold")
    shown = 0
    for name, d in sorted(OPS.items()):
        if front_end and front_end not in d.front_ends():
            continue
        shown += 1
        t.add_row(name, ",".join(d.front_ends()), " ".join(d.specs), escape(d.summary))
    console.print(t)
    bound = opset.bound_ops()
    console.print(
        f"{shown} kernels; ONNX binds {len(bound)} op types "
        f"({sum(len(v) for v in bound.values())} versioned entries incl. adapters); "
        f"ncnn declares {len(LAYERS)} layers (stdops ops -f ncnn)"
    )


def _ncnn_layers(layers: dict, only: str | None) -> None:
    from .ncnn.spec import Ref, resolve_params

    def default(p) -> str:
        return f"= {p.default.name}" if isinstance(p.default, Ref) else repr(p.default)

    if only is not None:
        spec = layers.get(only)
        if spec is None:
            raise StdopsError(f"no ncnn layer named {only!r}")
        console.print(f"[bold]{escape(only)}[/bold]: {escape(spec.doc)}")
        by_name = {p.name: p for p in spec.params}
        t = Table(title="params, in ncnn's load order")
        for col in ("id", "name", "type", "default"):
            t.add_column(col)
        for p in spec.params:
            t.add_row(str(p.id), p.name, p.resolved_kind(by_name), escape(default(p)))
        console.print(t)
        try:
            ws = list(spec.weights(resolve_params(spec, {}, only, None)))
            console.print(
                "weights with default params: "
                + (", ".join(f"{w.name} ({w.size}, {'tagged' if w.tagged else 'raw'})" for w in ws) or "none")
            )
        except Exception:  # noqa: BLE001 - some layers need params to size their weights
            console.print("weights: sized by the params")
        return
    t = Table(title="ncnn layers")
    for col in ("layer", "bottoms/tops", "params (id=name)", "summary"):
        t.add_column(col, overflow="fold")
    for name, spec in sorted(layers.items()):
        params = " ".join(f"{p.id}={p.name}" for p in spec.params)
        arity = f"{'*' if spec.n_inputs is None else spec.n_inputs}/{'*' if spec.n_outputs is None else spec.n_outputs}"
        t.add_row(name, arity, escape(params) or "-", escape(spec.doc.splitlines()[0] if spec.doc else ""))
    console.print(t)


@app.command()
def demo() -> None:
    """Run the bundled examples: the XOR network as ONNX and as ncnn (same answers, one kernel library),
    and a damped oscillator written in MDF."""
    from . import load
    from .examples import demo_inputs, demo_mdf_path, demo_model_path, demo_ncnn_paths

    feeds = demo_inputs()
    path = demo_model_path()
    m = load(path)
    console.print(
        f"[bold]ONNX[/bold] {escape(str(path))}: {len(m.proto.graph.node)} nodes, {m.parameter_count():,} parameters"
    )
    result = m.run(feeds)
    _print_outputs(result)
    param, weights = demo_ncnn_paths()
    from .ncnn import Net

    net = Net.load(param, weights)
    console.print(f"[bold]ncnn[/bold] {escape(str(param))}: {len(net.layers)} layers")
    probs = net.run({"x": feeds["x"]})["probabilities"]
    t = Table(title="XOR truth table (ONNX and ncnn)")
    for col in ("a", "b", "label", "P(label) ONNX", "P(label) ncnn"):
        t.add_column(col, justify="right")
    for (a, b), label, p_onnx, p_ncnn in zip(feeds["x"], result["label"], result["probabilities"], probs):
        t.add_row(f"{a:g}", f"{b:g}", str(int(label)), f"{p_onnx[label]:.6f}", f"{p_ncnn[label]:.6f}")
    console.print(t)
    mdf_path = demo_mdf_path()
    if mdf_path is not None:
        from .mdf import Simulation
        from .mdf import load as load_mdf

        sim = Simulation(load_mdf(mdf_path))
        traj = sim.run(duration=10.0, dt=0.01)
        console.print(f"[bold]MDF[/bold] {escape(str(mdf_path))}: {len(traj.times)} time steps")
        for key, v in traj.columns():
            console.print(f"  {escape(key)}: start {v[0]:.4g}, end {v[-1]:.4g}, min {v.min():.4g}, max {v.max():.4g}")


def main(argv: list | None = None) -> int:
    """Console entry point: one line and exit 2 for a StdopsError."""
    args = list(sys.argv[1:] if argv is None else argv)
    from .perf import tune_allocator

    tune_allocator()
    debug = "--debug" in args or os.environ.get("STDOPS_DEBUG") == "1"
    try:
        app(args=args, standalone_mode=False)
    except StdopsError as e:
        if debug:
            raise
        print("error: " + " ".join(str(e).split()), file=sys.stderr)  # one line, never wrapped
        return 2
    except typer.Exit as e:
        return int(e.exit_code or 0)
    except Exception as e:  # click's usage errors
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            return e.exit_code
        if isinstance(e, click.exceptions.Abort):
            return 1
        raise
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
