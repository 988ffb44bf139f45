"""Property-based fuzzing of the Python API (issue 27): ``Simulator`` arguments, ``rollout`` arguments and
``advance`` arguments, each drawn from a mix of valid values and the kinds of bad input a new user writes
(bools for numbers, complex numbers, NaN, inf, strings, wrong shapes, huge counts, duplicates, misspelt
parameters). Every outcome is a success whose trajectory's status is truthful, or one
:class:`pbframework.PbfError`, within the per-case bound (``tests/_fuzz.py``).
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pbframework as pbf

from _fuzz import check_trajectory, long_profile, profile, run_case, write_report

MODEL = pbf.models.chain(2, joint="revolute")
MODELS = {"chain2": MODEL, "chain2_ball2": pbf.models.chain(2), "box": pbf.models.box()}
"""The models the generated arguments are tried on: hinges, two-axis joints, and a free joint (a quaternion in
q, nq != nv)."""

BAD_NUMBERS = (True, False, 1j, 1 + 0j, float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-300, 1e300,
               10 ** 400, "0.01", None, [0.01], np.float64(0.01), np.int64(1), np.nan)
BAD_THINGS = (5, "abc", b"x", None, [], {}, {"x": 1}, ("gravity",), object(), 1.5, True)

numbers = st.one_of(st.sampled_from(BAD_NUMBERS), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(-10, 10 ** 20))


def _sometimes(valid, bad):
    """Mostly the valid strategy, sometimes bad input."""
    return st.one_of(valid, valid, bad)


simulator_kwargs = st.fixed_dictionaries({}, optional={
    "model": st.sampled_from(sorted(MODELS)),
    "integrator": _sometimes(st.sampled_from(("rk4", "semi_implicit_euler", "pbad", "forward_euler")),
                             st.sampled_from(("verlet", "", 5, None, "RK4", "pbad "))),
    "order": _sometimes(st.sampled_from((None, 2, 3, 4)), st.sampled_from((0, -1, 2.5, True, "3", 10 ** 9, 1j))),
    "solver": _sometimes(st.sampled_from(("auto", "lm", "jtj_lm")), st.sampled_from(("newton", 5, None, ""))),
    "dt": _sometimes(st.sampled_from((0.01, 0.02, 0.05)), numbers),
    "forces": _sometimes(
        st.sampled_from((["gravity"], None, [], ["gravity", ("joint_damping", {"damping": 0.1})])),
        st.sampled_from((5, "gravity", ["gravity", "gravity"], [("joint_damping", {"dampng": 0.1})],
                         [("joint_damping", {"damping": "x"})], [("joint_damping", {"damping": float("nan")})],
                         [("gravity", 5)], ["wind"], [None], {"gravity": {}}, [("pd", {"kp": -1})]))),
    "solver_options": _sometimes(st.sampled_from((None, {"max_iter": 20})),
                                 st.sampled_from(("abc", 5, {"max_iterations": 3}, {"max_iter": -1}, {"max_iter": "x"},
                                                  {1: 2}, [("max_iter", 3)]))),
    "on_failure": _sometimes(st.sampled_from(("stop", "continue", "raise")), st.sampled_from(("foo", 5, None, ""))),
    "max_halvings": _sometimes(st.sampled_from((0, 2, 4)), st.sampled_from((-1, 2.0, True, "4", 10 ** 9))),
    "max_speed": _sometimes(st.sampled_from((1e4, 100.0)), numbers),
    "energy_limit": _sometimes(st.sampled_from((None, 100.0, 50)), numbers),
    "objective": _sometimes(st.sampled_from(("auto", "energy", "residual")), st.sampled_from(("x", 5, None))),
    "precondition": _sometimes(st.booleans(), st.sampled_from((1, "yes", None))),
    "adaptive": _sometimes(st.sampled_from((False, True, {"rtol": 1e-4})),
                           st.sampled_from((5, "yes", {"rtol": -1}, {"rtl": 1e-4}, {"rtol": float("nan")}))),
    "backend": _sometimes(st.just("casadi"), st.sampled_from(("cuda", 5, "", None))),
    "backend_options": _sometimes(st.just(None), st.sampled_from(("abc", {"threads": 2}, 5))),
    "fd": _sometimes(st.sampled_from(("aba", "jsiia")), st.sampled_from(("featherstone", 5, None))),
    "max_steps": _sometimes(st.just(400), st.sampled_from((0, -1, 2.5, True, "10", None))),
})

rollout_args = st.fixed_dictionaries({}, optional={
    "duration": _sometimes(st.sampled_from((0.05, 0.1, 0.2)), numbers),
    "steps": _sometimes(st.sampled_from((1, 3, 10)), st.sampled_from((0, -1, 2.0, True, "3", 10 ** 15, np.int64(3)))),
    "t0": _sometimes(st.just(0.0), numbers),
    "progress": _sometimes(st.just(False), st.sampled_from((1, "yes", None))),
    "q0": st.sampled_from(("valid", "valid", "short", "nan", "str", "complex", "2d", "none", "list", "quaternion")),
    "qd0": st.sampled_from(("none", "valid", "short", "inf", "str")),
})

advance_args = st.fixed_dictionaries({
    "state": st.sampled_from(("valid", "short", "long", "nan", "str", "2d", "complex", "none", "list")),
    "t": _sometimes(st.just(0.0), numbers),
    "dt": _sometimes(st.sampled_from((None, 0.01)), numbers),
})

def _start(model: pbf.ArticulatedBody) -> np.ndarray:
    q = model.neutral()
    if model.nq == model.nv:
        q = q + 0.3
    else:
        q[2] = 1.0                                  # the box above the ground
    return q


def _q0(model: pbf.ArticulatedBody, kind: str):
    q = _start(model)
    bad = q.copy()
    bad[0] = np.nan
    unnormalised = q.copy()
    unnormalised[-1] += 0.5
    return {"valid": q, "short": q[:-1], "nan": bad, "str": "ab", "complex": q + 0.1j, "2d": np.stack([q, q]),
            "none": None, "list": list(q), "quaternion": unnormalised}[kind]


def _qd0(model: pbf.ArticulatedBody, kind: str):
    v = np.full(model.nv, 0.1)
    return {"none": None, "valid": v, "short": np.zeros(model.nv + 1), "inf": np.append(np.inf, v[1:]),
            "str": "fast"}[kind]


def _simulator(kwargs: dict) -> pbf.Simulator:
    kwargs = {"integrator": "rk4", "max_steps": 400, **kwargs}
    model = MODELS[kwargs.pop("model", "chain2")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pbf.Simulator(model, **kwargs)


def _rollout(kwargs: dict, args: dict):
    sim = _simulator(kwargs)
    q0 = _q0(sim.model, args.pop("q0", "valid"))
    qd0 = _qd0(sim.model, args.pop("qd0", "none"))
    if "duration" not in args and "steps" not in args:
        args["steps"] = 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sim.rollout(q0, qd0, **args)


def _advance(kwargs: dict, args: dict):
    sim = _simulator(kwargs)
    s = sim.initial_state(_start(sim.model))
    state = {"valid": s, "short": s[:-1], "long": np.append(s, 0.0), "nan": np.full_like(s, np.nan), "str": "s",
             "2d": np.stack([s, s]), "complex": s + 1j, "none": None, "list": list(s)}[args["state"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sim.advance(state, args["t"], args["dt"])


def _check_advance(result) -> None:
    s, stats = result
    assert isinstance(stats, pbf.simulate.StepStats)
    if stats.converged:
        assert s.ndim == 1 and s.size > 0


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    write_report()


def _run_rollout(name, kwargs, args):
    run_case(name, lambda: _rollout(dict(kwargs), dict(args)), check_trajectory, f"Simulator({kwargs}).rollout({args})")


def _run_advance(name, kwargs, args):
    run_case(name, lambda: _advance(dict(kwargs), dict(args)), _check_advance, f"Simulator({kwargs}).advance({args})")


LONG = os.environ.get("PBF_FUZZ") == "long"


@given(kwargs=simulator_kwargs, args=rollout_args)
@profile("api", long=LONG)
def test_simulator_and_rollout_arguments(kwargs, args):
    _run_rollout("api_rollout", kwargs, args)


@given(kwargs=simulator_kwargs, args=advance_args)
@profile("api", long=LONG)
def test_advance_arguments(kwargs, args):
    _run_advance("api_advance", kwargs, args)


@pytest.mark.slow
@given(kwargs=simulator_kwargs, args=rollout_args)
@profile("api", long=True)
@long_profile
def test_simulator_and_rollout_arguments_long_profile(kwargs, args):
    _run_rollout("api_rollout_long", kwargs, args)


@pytest.mark.slow
@given(kwargs=simulator_kwargs, args=advance_args)
@profile("api", long=True)
@long_profile
def test_advance_arguments_long_profile(kwargs, args):
    _run_advance("api_advance_long", kwargs, args)


# -- the issue's examples, each with the one error it must give -------------------------------------------------

@pytest.mark.parametrize("kwargs,error,message", [
    ({"on_failure": "foo"}, pbf.StepError, "on_failure: 'foo' is not a valid FailurePolicy"),
    ({"forces": 5}, pbf.ArgumentTypeError, "forces must be a list of force models"),
    ({"solver_options": "abc"}, pbf.ArgumentTypeError, "solver_options must be a dict of options or None"),
    ({"forces": [("joint_damping", {"dampng": 0.1})]}, pbf.PluginParameterError, "did you mean 'damping'"),
    ({"forces": [("joint_damping", {"damping": "x"})]}, pbf.PluginValueError,
     "joint_damping: damping must be a number .*; accepted: damping=0.1, dofs=None"),
    ({"forces": ["gravity", "gravity"]}, pbf.StepError, "force model 'gravity' is listed twice"),
    ({"dt": True}, pbf.ArgumentTypeError, "dt must be a positive finite number of seconds, got bool True"),
    ({"dt": 0.01 + 0j}, pbf.ArgumentTypeError, "dt must be a positive finite number of seconds, got complex"),
    ({"integrator": "rk4", "solver": "lm"}, pbf.StepError, "is explicit and uses no solver; drop solver='lm'"),
])
def test_simulator_issue_examples(kwargs, error, message):
    with pytest.raises(error, match=message) as e:
        pbf.Simulator(MODEL, **kwargs)
    assert isinstance(e.value, pbf.PbfError)


def test_rollout_and_advance_issue_examples():
    sim = pbf.Simulator(MODEL, "rk4", dt=0.01)
    q0 = np.array([0.3, -0.2])
    with pytest.raises(pbf.StepError, match=r"give duration \(0.1 s\) or steps \(3\), not both"):
        sim.rollout(q0, None, 0.1, steps=3)
    with pytest.raises(pbf.LimitError, match="more than the limit of 10000000 steps"):
        sim.rollout(q0, None, steps=10 ** 15)
    with pytest.raises(pbf.LimitError, match="max_steps raises it"):
        sim.rollout(q0, None, duration=1e300)
    s = sim.initial_state(q0)
    with pytest.raises(pbf.StepError, match=r"state: expected a vector of length 4 .* got shape \(3,\)"):
        sim.advance(s[:-1], 0.0)
    for dt in (-0.01, float("nan"), 0.0):
        with pytest.raises(pbf.StepError, match="dt must be a positive finite number of seconds"):
            sim.advance(s, 0.0, dt)
    # the limit is raisable: the same count passes with max_steps raised
    big = pbf.Simulator(MODEL, "rk4", dt=0.01, max_steps=20)
    with pytest.raises(pbf.LimitError):
        big.rollout(q0, None, steps=21)
    assert big.rollout(q0, None, steps=20).q.shape == (21, 2)


def test_memory_limit_is_checked_before_the_run():
    sim = pbf.Simulator(MODEL, "rk4", dt=0.01, max_memory=10_000)
    with pytest.raises(pbf.LimitError, match="max_memory raises it"):
        sim.rollout(np.array([0.3, -0.2]), None, steps=1000)
    assert math.isfinite(sim.rollout(np.array([0.3, -0.2]), None, steps=10).energy[-1])


@pytest.mark.parametrize("kwargs,what", [({"objective": "energy"}, "objective='energy'"),
                                         ({"precondition": False}, "precondition=False"),
                                         ({"solver_options": {"max_iter": 3}}, "solver_options")])
def test_options_an_explicit_integrator_would_ignore_are_errors(kwargs, what):
    with pytest.raises(pbf.StepError, match=f"integrator 'rk4' is explicit .*drop {what}"):
        pbf.Simulator(MODEL, "rk4", **kwargs)


def test_a_force_model_refusing_the_model_is_a_step_error():
    """Found by the long fuzz profile: joint_damping on the box (only a free joint) raised the plug-in's raw
    ValueError from inside build_step."""
    with pytest.raises(pbf.StepError, match="integrator 'rk4' on model 'box': joint_damping: model 'box' has no "
                                            "actuated coordinates"):
        pbf.Simulator(MODELS["box"], "rk4", forces=["gravity", ("joint_damping", {"damping": 0.1})])
