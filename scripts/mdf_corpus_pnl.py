"""PsyNeuLink compositions for the MDF producers' corpus (run inside .venv-pnl by make_mdf_corpus.py).

Each builder returns ``(composition, inputs)``: ``inputs`` is ``{input node: [trial inputs]}`` as
``Composition.run`` takes it (several trials, the inputs changing from trial to trial). Parameters are
small hand-chosen numbers; nothing is random except where a seed is given. Noise is off everywhere
(PsyNeuLink's noise and MDF's are different generators: their results could not be compared).
"""

from __future__ import annotations

import numpy as np
import psyneulink as pnl

BUILDERS: dict = {}


def builder(fn):
    BUILDERS[fn.__name__] = fn
    return fn


def _T(name, function, size=1, **kw):  # noqa: N802 - a TransferMechanism
    return pnl.TransferMechanism(name=name, function=function, input_shapes=size, **kw)


def _chain(name, functions, inputs, size=1):
    mechs = [_T(f"{name}_{i}", f, size=size) for i, f in enumerate(functions)]
    comp = pnl.Composition(name=name, pathways=[mechs])
    return comp, {mechs[0]: inputs}


# -- chains of TransferMechanisms ---------------------------------------------------------------------


@builder
def linear_chain():
    return _chain(
        "linear_chain",
        [pnl.Linear(slope=2.0, intercept=1.0), pnl.Linear(slope=-0.5, intercept=0.25)],
        [[1.0], [2.0], [-3.0], [0.5]],
    )


@builder
def logistic_chain():
    return _chain("logistic_chain", [pnl.Logistic(gain=1.5), pnl.Logistic(gain=0.5, bias=-1.0)], [[0.1], [2.0], [-1.0]])


@builder
def exponential_chain():
    return _chain(
        "exponential_chain", [pnl.Exponential(rate=0.5, scale=2.0), pnl.Exponential(rate=-0.25)], [[0.1], [1.0], [-2.0]]
    )


@builder
def relu_chain():
    return _chain(
        "relu_chain",
        [pnl.Linear(slope=1.0, intercept=-0.5), pnl.ReLU(gain=2.0, bias=0.1, leak=0.05)],
        [[0.1], [1.0], [-2.0], [3.0]],
    )


@builder
def tanh_chain():
    return _chain("tanh_chain", [pnl.Linear(slope=0.5), pnl.Tanh()], [[0.1], [1.0], [-2.0]])


@builder
def mixed_chain_vectors():
    """Four function kinds on 2-element layers joined by weight matrices (MappingProjections)."""
    a = _T("a", pnl.Linear(slope=1.0), size=2)
    b = _T("b", pnl.Logistic(gain=1.0), size=3)
    c = _T("c", pnl.Exponential(rate=0.3), size=2)
    d = _T("d", pnl.ReLU(gain=1.0), size=2)
    w1 = np.array([[0.5, -0.2, 0.1], [0.3, 0.8, -0.6]])
    w2 = np.array([[1.0, -1.0], [0.5, 0.25], [-0.75, 0.2]])
    w3 = np.array([[0.6, -0.4], [0.1, 0.9]])
    comp = pnl.Composition(name="mixed_chain_vectors", pathways=[[a, w1, b, w2, c, w3, d]])
    return comp, {a: [[1.0, 2.0], [0.0, -1.0], [0.5, 0.5]]}


@builder
def linear_vectors():
    a = _T("lv_a", pnl.Linear(slope=0.5, intercept=-1.0), size=3)
    b = _T("lv_b", pnl.Linear(slope=2.0), size=2)
    comp = pnl.Composition(name="linear_vectors", pathways=[[a, np.array([[1.0, 0.5], [-0.5, 2.0], [0.25, 0.0]]), b]])
    return comp, {a: [[1.0, 2.0, 3.0], [0.0, -1.0, 1.0], [2.0, 2.0, 2.0]]}


@builder
def logistic_gain_bias_vectors():
    a = _T("lg_a", pnl.Logistic(gain=2.0, bias=0.5), size=2)
    b = _T("lg_b", pnl.Logistic(gain=0.7, bias=-0.3), size=2)
    comp = pnl.Composition(name="logistic_gain_bias_vectors", pathways=[[a, np.array([[1.0, -1.0], [0.5, 0.5]]), b]])
    return comp, {a: [[1.0, -1.0], [0.0, 0.5], [2.0, -2.0]]}


@builder
def logistic_offset_scale():
    """PsyNeuLink's Logistic with an offset and x_0: exported as MDF's logistic, whose offset enters the
    exponent with the other sign and which has no x_0 or scale, so the file computes something else."""
    return _chain(
        "logistic_offset_scale",
        [pnl.Linear(slope=1.0), pnl.Logistic(gain=1.0, offset=0.5, x_0=0.2, scale=2.0)],
        [[0.1], [1.0], [-1.0]],
    )


@builder
def exponential_vectors():
    return _chain(
        "exponential_vectors",
        [pnl.Exponential(rate=0.2, scale=0.5, bias=0.1, offset=-0.2)],
        [[0.1, 0.2], [1.0, -1.0], [-2.0, 3.0]],
        size=2,
    )


@builder
def relu_leak_vectors():
    return _chain(
        "relu_leak_vectors", [pnl.ReLU(gain=1.5, bias=0.2, leak=0.1)], [[0.1, -0.5, 2.0], [1.0, -3.0, 0.0]], size=3
    )


@builder
def long_chain():
    fns = [
        pnl.Linear(slope=1.1, intercept=0.1),
        pnl.Logistic(gain=2.0),
        pnl.Linear(slope=3.0, intercept=-1.5),
        pnl.Exponential(rate=0.3),
        pnl.ReLU(gain=0.5, bias=0.2),
        pnl.Logistic(gain=1.0, bias=-0.5),
    ]
    return _chain("long_chain", fns, [[0.5], [-0.5], [1.5], [0.0]])


# -- integrators -----------------------------------------------------------------------------------------


def _integrator(name, function, inputs, size=1, **kw):
    m = pnl.IntegratorMechanism(name=name, function=function, input_shapes=size, **kw)
    src = _T(f"{name}_in", pnl.Linear(slope=1.0), size=size)
    comp = pnl.Composition(name=name, pathways=[[src, m]])
    return comp, {src: inputs}


@builder
def simple_integrator():
    return _integrator("simple_integrator", pnl.SimpleIntegrator(rate=0.5, offset=0.1), [[1.0], [2.0], [-1.0], [0.5]])


@builder
def adaptive_integrator():
    return _integrator(
        "adaptive_integrator", pnl.AdaptiveIntegrator(rate=0.3, offset=0.05), [[1.0], [2.0], [-1.0], [0.5]]
    )


@builder
def accumulator_integrator():
    return _integrator(
        "accumulator_integrator", pnl.AccumulatorIntegrator(rate=0.9, increment=0.2), [[1.0], [2.0], [-1.0], [0.5]]
    )


@builder
def leaky_competing_integrator():
    return _integrator(
        "leaky_competing_integrator",
        pnl.LeakyCompetingIntegrator(rate=0.4, leak=0.2, time_step_size=0.1),
        [[1.0, 0.5], [0.2, 0.9], [0.0, 0.0]],
        size=2,
    )


@builder
def fitzhugh_nagumo_integrator():
    return _integrator(
        "fitzhugh_nagumo_integrator",
        pnl.FitzHughNagumoIntegrator(
            time_step_size=0.05,
            a_v=-1 / 3,
            b_v=0.0,
            c_v=1.0,
            d_v=0.0,
            e_v=-1.0,
            f_v=1.0,
            threshold=-1.0,
            time_constant_v=1.0,
            a_w=1.0,
            b_w=-0.8,
            c_w=0.7,
            time_constant_w=12.5,
        ),
        [[0.5], [1.0], [0.0], [1.5]],
    )


@builder
def drift_diffusion_integrator():
    return _integrator(
        "drift_diffusion_integrator",
        pnl.DriftDiffusionIntegrator(rate=0.5, noise=0.0, time_step_size=0.1, starting_value=0.1, threshold=10.0),
        [[1.0], [0.5], [-0.5], [2.0]],
    )


@builder
def simple_integrator_vectors():
    return _integrator(
        "simple_integrator_vectors",
        pnl.SimpleIntegrator(rate=0.25, offset=-0.1),
        [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [-1.0, 0.5, 1.0]],
        size=3,
    )


@builder
def adaptive_integrator_vectors():
    return _integrator(
        "adaptive_integrator_vectors",
        pnl.AdaptiveIntegrator(rate=0.6),
        [[1.0, -1.0], [0.5, 0.5], [2.0, 0.0], [0.0, 0.0], [1.0, 1.0]],
        size=2,
    )


@builder
def integrators_in_series():
    """A simple integrator feeding an adaptive one feeding an accumulator: state in three nodes."""
    a = _T("ser_in", pnl.Linear(slope=1.0))
    b = pnl.IntegratorMechanism(name="ser_simple", function=pnl.SimpleIntegrator(rate=0.5))
    c = pnl.IntegratorMechanism(name="ser_adaptive", function=pnl.AdaptiveIntegrator(rate=0.25))
    d = pnl.IntegratorMechanism(name="ser_accumulator", function=pnl.AccumulatorIntegrator(rate=0.5, increment=1.0))
    comp = pnl.Composition(name="integrators_in_series", pathways=[[a, b, c, d]])
    return comp, {a: [[1.0], [1.0], [-2.0], [0.5], [0.0]]}


@builder
def fitzhugh_nagumo_many_trials():
    return _integrator(
        "fitzhugh_nagumo_many_trials",
        pnl.FitzHughNagumoIntegrator(time_step_size=0.1, initial_v=-1.0, initial_w=-0.5),
        [[0.5]] * 10 + [[0.0]] * 5,
    )


@builder
def drift_diffusion_integrator_to_threshold():
    """DDM integration with noise off, run until the decision variable reaches its threshold."""
    src = _T("dd_in", pnl.Linear(slope=1.0))
    m = pnl.IntegratorMechanism(
        name="dd", function=pnl.DriftDiffusionIntegrator(rate=1.0, noise=0.0, time_step_size=0.05, threshold=1.0)
    )
    comp = pnl.Composition(name="drift_diffusion_integrator_to_threshold", pathways=[[src, m]])
    comp.scheduler.add_condition(m, pnl.Always())
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.Threshold(m, "value", 0.999, ">=", indices=(0, 0))}
    return comp, {src: [[2.0], [3.0]]}


@builder
def ddm_analytical():
    src = _T("stimulus", pnl.Linear(slope=1.0))
    ddm = pnl.DDM(
        name="ddm",
        function=pnl.DriftDiffusionAnalytical(
            drift_rate=0.5, threshold=1.0, starting_value=0.1, non_decision_time=0.2, noise=0.5
        ),
    )
    comp = pnl.Composition(name="ddm_analytical", pathways=[[src, ddm]])
    return comp, {src: [[0.3], [1.0], [-0.5]]}


@builder
def transfer_integrator_mode():
    """A TransferMechanism in integrator mode: its input is smoothed by an AdaptiveIntegrator."""
    src = _T("src", pnl.Linear(slope=1.0))
    m = pnl.TransferMechanism(
        name="smooth", function=pnl.Logistic(gain=2.0), integrator_mode=True, integration_rate=0.25
    )
    comp = pnl.Composition(name="transfer_integrator_mode", pathways=[[src, m]])
    return comp, {src: [[1.0], [0.0], [-1.0], [2.0]]}


# -- scheduling conditions -------------------------------------------------------------------------------------


def _abc(name):
    a = _T("A", pnl.Linear(slope=1.0, intercept=1.0))
    b = _T("B", pnl.Linear(slope=2.0))
    c = pnl.IntegratorMechanism(name="C", function=pnl.SimpleIntegrator(rate=1.0))
    comp = pnl.Composition(name=name, pathways=[[a, b, c]])
    return comp, a, b, c


@builder
def cond_every_n_calls():
    comp, a, b, c = _abc("cond_every_n_calls")
    comp.scheduler.add_condition(b, pnl.EveryNCalls(a, 2))
    comp.scheduler.add_condition(c, pnl.EveryNCalls(b, 2))
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_after_n_calls():
    comp, a, b, c = _abc("cond_after_n_calls")
    comp.scheduler.add_condition(b, pnl.AfterNCalls(a, 2))
    comp.scheduler.add_condition(c, pnl.EveryNCalls(b, 1))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNCalls(c, 2)}
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_at_pass():
    comp, a, b, c = _abc("cond_at_pass")
    comp.scheduler.add_condition(a, pnl.AtPass(0))
    comp.scheduler.add_condition(b, pnl.Any(pnl.AtPass(1), pnl.AtPass(3)))
    comp.scheduler.add_condition(c, pnl.EveryNCalls(b, 1))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNPasses(5)}
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_all_any():
    comp, a, b, c = _abc("cond_all_any")
    comp.scheduler.add_condition(b, pnl.All(pnl.EveryNCalls(a, 1), pnl.AfterNCalls(a, 2)))
    comp.scheduler.add_condition(c, pnl.Any(pnl.EveryNCalls(b, 2), pnl.AtPass(4)))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNPasses(6)}
    return comp, {a: [[1.0], [0.5], [-1.0]]}


@builder
def cond_threshold():
    """An integrator that runs until its value crosses a threshold (a Threshold termination)."""
    a = _T("A", pnl.Linear(slope=1.0))
    c = pnl.IntegratorMechanism(name="C", function=pnl.SimpleIntegrator(rate=0.5))
    comp = pnl.Composition(name="cond_threshold", pathways=[[a, c]])
    comp.scheduler.add_condition(c, pnl.Always())
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.Threshold(c, "value", 3.0, ">=", indices=(0, 0))}
    return comp, {a: [[1.0], [0.75], [2.0]]}


@builder
def cond_time_interval():
    comp, a, b, c = _abc("cond_time_interval")
    comp.scheduler.add_condition(a, pnl.TimeInterval(repeat=2, unit="ms"))
    comp.scheduler.add_condition(b, pnl.EveryNCalls(a, 1))
    comp.scheduler.add_condition(c, pnl.EveryNCalls(b, 1))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNCalls(c, 2)}
    return comp, {a: [[1.0], [2.0]]}


@builder
def cond_termination_all_have_run():
    comp, a, b, c = _abc("cond_termination_all_have_run")
    comp.scheduler.add_condition(a, pnl.Always())
    comp.scheduler.add_condition(b, pnl.EveryNCalls(a, 3))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AllHaveRun()}
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_when_finished_never():
    comp, a, b, c = _abc("cond_just_ran")
    comp.scheduler.add_condition(b, pnl.All(pnl.JustRan(a), pnl.BeforeNCalls(b, 2)))
    comp.scheduler.add_condition(c, pnl.EveryNCalls(b, 1))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNCalls(c, 2)}
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_every_n_passes():
    comp, a, b, c = _abc("cond_every_n_passes")
    comp.scheduler.add_condition(b, pnl.EveryNPasses(2))
    comp.scheduler.add_condition(c, pnl.EveryNCalls(b, 1))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNPasses(5)}
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_before_at_n_calls():
    comp, a, b, c = _abc("cond_before_at_n_calls")
    comp.scheduler.add_condition(a, pnl.BeforeNCalls(a, 3))
    comp.scheduler.add_condition(b, pnl.AtNCalls(a, 2))
    comp.scheduler.add_condition(c, pnl.Always())
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNPasses(4)}
    return comp, {a: [[1.0], [-1.0], [0.5]]}


@builder
def cond_not_after_pass():
    comp, a, b, c = _abc("cond_not_after_pass")
    comp.scheduler.add_condition(b, pnl.Not(pnl.AtPass(0)))
    comp.scheduler.add_condition(c, pnl.AfterPass(1))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNPasses(4)}
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_when_finished():
    comp, a, b, c = _abc("cond_when_finished")
    comp.scheduler.add_condition(c, pnl.WhenFinished(b))
    return comp, {a: [[1.0], [2.0], [3.0]]}


@builder
def cond_after_n_calls_termination():
    """A trial that lasts until the integrator has run 4 times."""
    a = _T("A", pnl.Linear(slope=1.0))
    c = pnl.IntegratorMechanism(name="C", function=pnl.AdaptiveIntegrator(rate=0.5))
    comp = pnl.Composition(name="cond_after_n_calls_termination", pathways=[[a, c]])
    comp.scheduler.add_condition(c, pnl.Always())
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNCalls(c, 4)}
    return comp, {a: [[1.0], [2.0], [0.0]]}


@builder
def cond_any_of_calls():
    comp, a, b, c = _abc("cond_any_of_calls")
    comp.scheduler.add_condition(b, pnl.Any(pnl.EveryNCalls(a, 3), pnl.AtPass(1)))
    comp.scheduler.add_condition(c, pnl.All(pnl.EveryNCalls(b, 1), pnl.Not(pnl.AtPass(1))))
    comp.termination_processing = {pnl.TimeScale.TRIAL: pnl.AfterNPasses(7)}
    return comp, {a: [[1.0], [0.5], [-1.0], [2.0]]}


# -- nested compositions ---------------------------------------------------------------------------------------


@builder
def nested_composition():
    """A nested composition beside a plain mechanism, both fed by the trial's inputs."""
    inner_a = _T("inner_a", pnl.Linear(slope=3.0))
    inner_b = pnl.IntegratorMechanism(name="inner_b", function=pnl.AdaptiveIntegrator(rate=0.5))
    inner = pnl.Composition(name="inner", pathways=[[inner_a, inner_b]])
    solo = _T("solo", pnl.Logistic(gain=1.0))
    outer = pnl.Composition(name="nested_composition", nodes=[inner, solo])
    return outer, {inner: [[1.0], [0.0], [-1.0], [2.0]], solo: [[0.5], [1.0], [1.5], [2.0]]}


@builder
def nested_two_levels():
    m1 = _T("m1", pnl.Linear(slope=2.0))
    m1b = pnl.IntegratorMechanism(name="m1b", function=pnl.SimpleIntegrator(rate=0.5))
    deep = pnl.Composition(name="deep", pathways=[[m1, m1b]])
    middle = pnl.Composition(name="middle", nodes=[deep])
    outer = pnl.Composition(name="nested_two_levels", nodes=[middle])
    return outer, {middle: [[1.0], [2.0], [3.0]]}


@builder
def nested_with_conditions():
    """The nested graph has its own scheduling conditions."""
    a = _T("na", pnl.Linear(slope=1.0, intercept=1.0))
    b = pnl.IntegratorMechanism(name="nb", function=pnl.SimpleIntegrator(rate=1.0))
    inner = pnl.Composition(name="inner_cond", pathways=[[a, b]])
    inner.scheduler.add_condition(b, pnl.EveryNCalls(a, 2))
    outer = pnl.Composition(name="nested_with_conditions", nodes=[inner])
    return outer, {inner: [[1.0], [2.0], [-1.0]]}


@builder
def nested_chained():
    """src -> nested composition -> out: PsyNeuLink 0.21 exports no edge into or out of a nested
    composition (projections to its interface mechanisms are left out), so the file cannot reproduce it."""
    inner_a = _T("c_inner_a", pnl.Linear(slope=3.0))
    inner = pnl.Composition(name="c_inner", pathways=[[inner_a]])
    src = _T("c_src", pnl.Linear(slope=1.0, intercept=0.5))
    out = _T("c_out", pnl.Logistic(gain=1.0))
    outer = pnl.Composition(name="nested_chained", pathways=[[src, inner, out]])
    return outer, {src: [[1.0], [0.0], [-1.0]]}


# -- the Stroop model --------------------------------------------------------------------------------------------


def _stroop(name, integrator_mode=False):
    """Cohen, Dunbar & McClelland (1990)'s Stroop model, feed-forward form: colour and word pathways
    through logistic hidden layers into a shared response layer, with task demand units."""
    kw = dict(integrator_mode=True, integration_rate=0.1) if integrator_mode else {}
    colors_input = _T("colors_input", pnl.Linear, size=2)
    words_input = _T("words_input", pnl.Linear, size=2)
    task_input = _T("task_input", pnl.Linear, size=2)
    colors_hidden = pnl.TransferMechanism(
        name="colors_hidden", input_shapes=2, function=pnl.Logistic(gain=1.0, bias=-4.0), **kw
    )
    words_hidden = pnl.TransferMechanism(
        name="words_hidden", input_shapes=2, function=pnl.Logistic(gain=1.0, bias=-4.0), **kw
    )
    task = pnl.TransferMechanism(name="task", input_shapes=2, function=pnl.Logistic(gain=1.0), **kw)
    response = pnl.TransferMechanism(name="response", input_shapes=2, function=pnl.Logistic(gain=1.0), **kw)
    comp = pnl.Composition(name=name)
    comp.add_linear_processing_pathway(
        [
            colors_input,
            np.array([[2.2, -2.2], [-2.2, 2.2]]),
            colors_hidden,
            np.array([[1.3, -1.3], [-1.3, 1.3]]),
            response,
        ]
    )
    comp.add_linear_processing_pathway(
        [
            words_input,
            np.array([[2.6, -2.6], [-2.6, 2.6]]),
            words_hidden,
            np.array([[2.5, -2.5], [-2.5, 2.5]]),
            response,
        ]
    )
    comp.add_linear_processing_pathway([task_input, task])
    comp.add_projection(pnl.MappingProjection(matrix=np.array([[4.0, 4.0], [0.0, 0.0]])), task, colors_hidden)
    comp.add_projection(pnl.MappingProjection(matrix=np.array([[0.0, 0.0], [4.0, 4.0]])), task, words_hidden)
    inputs = {
        colors_input: [[1, 0], [1, 0], [0, 1], [1, 0]],
        words_input: [[0, 0], [1, 0], [1, 0], [0, 1]],
        task_input: [[1, 0], [1, 0], [1, 0], [0, 1]],
    }
    return comp, inputs


@builder
def stroop():
    return _stroop("stroop")


def _stroop_single_pathway(name, integrator_mode=False, trials=None):
    """The same network with each layer receiving one projection: one input layer (colour 2, word 2, task 2)
    -> one hidden layer (colour 2, word 2: block weights, task demand as weights from the task units) ->
    response. The weights and biases are those of ``stroop``; the logistic bias -4 of the hidden units is
    a constant input unit (the seventh input) weighted -4."""
    kw = dict(integrator_mode=True, integration_rate=0.1) if integrator_mode else {}
    inp = _T(f"{name}_input", pnl.Linear, size=7)
    hidden = pnl.TransferMechanism(name=f"{name}_hidden", input_shapes=4, function=pnl.Logistic(gain=1.0), **kw)
    response = pnl.TransferMechanism(name=f"{name}_response", input_shapes=2, function=pnl.Logistic(gain=1.0), **kw)
    w_in = np.zeros((7, 4))
    w_in[0:2, 0:2] = [[2.2, -2.2], [-2.2, 2.2]]  # colour -> colour hidden
    w_in[2:4, 2:4] = [[2.6, -2.6], [-2.6, 2.6]]  # word -> word hidden
    w_in[4, 0:2] = 4.0  # colour naming task -> colour hidden
    w_in[5, 2:4] = 4.0  # word reading task -> word hidden
    w_in[6, :] = -4.0  # the hidden units' bias
    w_out = np.array([[1.3, -1.3], [-1.3, 1.3], [2.5, -2.5], [-2.5, 2.5]])
    comp = pnl.Composition(name=name, pathways=[[inp, w_in, hidden, w_out, response]])
    trials = trials or [
        [1, 0, 0, 0, 1, 0, 1],  # colour naming, no word
        [1, 0, 1, 0, 1, 0, 1],  # congruent
        [0, 1, 1, 0, 1, 0, 1],  # incongruent
        [1, 0, 0, 1, 0, 1, 1],  # word reading, incongruent
    ]
    return comp, {inp: trials}


@builder
def stroop_single_pathway():
    return _stroop_single_pathway("stroop_single_pathway")


@builder
def stroop_integrator_mode():
    """The Stroop network with integrating units, several trials of the same stimulus settling."""
    return _stroop_single_pathway(
        "stroop_integrator_mode", integrator_mode=True, trials=[[0, 1, 1, 0, 1, 0, 1]] * 5 + [[1, 0, 1, 0, 1, 0, 1]] * 3
    )
