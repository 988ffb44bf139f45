"""Forward-dynamics plug-ins abia, jsiia, cfa (seed 003) against Pinocchio's ABA.

Reference tests on random revolute chains (n = 2, 10, 50 to a relative 1e-9; n = 100, 200 within
10 eps cond(M)), on five robots of example-robot-data (abia, jsiia; cfa on the serial ones), on trees; the
depth formulas against the traced levels; and the generated C against the CasADi VM.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import pbframework as pbf
from pbframework.parallel import globalform as G
from pbframework import models
from pbframework.dynamics import forward_dynamics
from pbframework.model import ArticulatedBody, Joint, Link, ModelError
from pbframework.plugins.fd import abia, cfa, jsiia
from pbframework.parallel.scan import Levels, Schedule

pin = pytest.importorskip("pinocchio")

EPS = np.finfo(float).eps
TOL_SMALL = 1e-9            # relative error vs Pinocchio ABA, chains up to 50 links and real robots
COND_FACTOR = 10.0          # 100 / 200 links: error <= COND_FACTOR * eps * cond(M)
ALGORITHMS = {"abia": abia, "jsiia": jsiia, "cfa": cfa}


@pytest.fixture
def rng():
    return np.random.default_rng(3_2017)


def rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a, float) - b) / np.linalg.norm(b))


def pin_reference(model: ArticulatedBody, q, qd, tau):
    """Pinocchio's ABA on the same model, and cond(M)."""
    pm, order = G.to_pinocchio(model)
    pd = pm.createData()
    a = np.empty_like(q)
    a[order] = pin.aba(pm, pd, q[order], qd[order], tau[order])
    M = pin.crba(pm, pd, q[order])
    M = np.triu(M) + np.triu(M, 1).T
    return a, float(np.linalg.cond(M))


def evaluate(f, q, qd, tau) -> np.ndarray:
    return np.asarray(f(q, qd, tau)).ravel()


# -- the plug-in front ---------------------------------------------------------------------------------

def test_registered_and_selected_by_name():
    names = pbf.available("fd")
    assert {"abia", "jsiia", "cfa"} <= set(names)
    m = G.random_chain(4, seed=0)
    for name in ALGORITHMS:
        f = forward_dynamics(m, algorithm=name)
        assert f.name() == name and f.name_in() == ["q", "qd", "tau"] and f.name_out() == ["qdd"]
        assert f.size_in(0) == (4, 1) and f.size_out(0) == (4, 1)
        assert forward_dynamics(m, algorithm=name) is f                  # cached on the model
        assert callable(pbf.get_plugin("fd", name).meta["depth"])
    with pytest.raises(KeyError, match=r"available: .*abia.*cfa.*jsiia"):
        forward_dynamics(m, algorithm="fastest")


# -- random revolute chains --------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 10, 50])
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_random_chains_match_pinocchio(n, name, rng):
    m = G.random_chain(n, seed=n)
    f_seq = forward_dynamics(m, algorithm=name)
    f_par = ALGORITHMS[name].build(m, Schedule.PARALLEL)
    for _ in range(3):
        q, qd, tau = rng.normal(size=(3, n)) * np.array([[np.pi], [2.0], [5.0]])
        ref, _ = pin_reference(m, q, qd, tau)
        assert rel(evaluate(f_seq, q, qd, tau), ref) < TOL_SMALL
        assert rel(evaluate(f_par, q, qd, tau), ref) < TOL_SMALL


@pytest.mark.parametrize("n", [100, 200])
def test_long_chains_within_conditioning_bound(n, rng):
    """M(q) gets ill-conditioned; every algorithm stays within 10 eps cond(M) of Pinocchio."""
    m = G.random_chain(n, seed=7)
    q, qd, tau = rng.normal(size=(3, n))
    ref, cond = pin_reference(m, q, qd, tau)
    assert cond > 1e4                                                     # the regime this test is about
    for name in ALGORITHMS:
        err = rel(evaluate(forward_dynamics(m, algorithm=name), q, qd, tau), ref)
        assert err < COND_FACTOR * EPS * cond, f"{name}: {err:.2e} vs {COND_FACTOR * EPS * cond:.2e}"


def test_accuracy_against_long_double_reference(rng):
    m = G.random_chain(30, seed=11)
    gf = G.global_form(m)
    q, qd, tau = rng.normal(size=(3, gf.n))
    ref = np.asarray(G.reference_forward_dynamics(gf, q, qd, tau), float)
    _, cond = pin_reference(m, q, qd, tau)
    for name in ALGORITHMS:
        assert rel(evaluate(forward_dynamics(m, algorithm=name), q, qd, tau), ref) < 10 * EPS * cond


# -- trees and real robots -----------------------------------------------------------------------------

@pytest.mark.parametrize("schedule", [Schedule.SEQUENTIAL, Schedule.PARALLEL])
@pytest.mark.parametrize("name", ["abia", "jsiia"])
def test_trees_and_composite_joints(name, schedule, rng):
    for m in (models.spider(), models.chain(4), models.swimmer()):
        f = ALGORITHMS[name].build(m, schedule)
        q, qd, tau = rng.normal(size=(3, m.nq))
        ref, _ = pin_reference(m, q, qd, tau)
        assert rel(evaluate(f, q, qd, tau), ref) < TOL_SMALL, m.name


def test_cfa_explains_which_models_it_supports():
    with pytest.raises(ModelError) as e:
        forward_dynamics(models.spider(), algorithm="cfa")
    assert str(e.value) == ("cfa supports serial chains of 1-DOF joints (revolute, prismatic; fixed ones merged) "
                            "only (model 'spider' branches at link 'torso' into 4 chains); use aba, abia or jsiia "
                            "(any tree, every joint type)")
    with pytest.raises(ModelError, match=r"joint 'joint0' of link 'link0' has type 'ball2' with 2 coordinates"):
        forward_dynamics(models.chain(3), algorithm="cfa")
    with pytest.raises(ModelError, match=r"joint 'root' of link 'seg0' has type 'floating'.*use aba, abia or jsiia"):
        forward_dynamics(models.swimmer(), algorithm="cfa")


ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",
    "talos": "talos_data/robots/talos_reduced.urdf",
}
SERIAL_ROBOTS = {"ur5"}


def robots_dir():
    import sysconfig
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        d = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(d):
            return d
    return None


_AXES = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}


def from_pinocchio(pm, name: str) -> tuple[ArticulatedBody, np.ndarray]:
    """Our model of a fixed-base Pinocchio model (1-DOF joints), and for each of our coordinates Pinocchio's
    index. Independent of :func:`to_pinocchio`: the reference runs on Pinocchio's own URDF model."""
    links = [Link("base", 1.0)]                          # welded to the world: no dynamics
    joints = []
    for j in range(1, pm.njoints):
        sn = pm.joints[j].shortname().replace("JointModel", "")
        if sn in ("RX", "RY", "RZ"):
            kind, axis = "revolute", _AXES[sn[1]]
        elif sn in ("PX", "PY", "PZ"):
            kind, axis = "prismatic", _AXES[sn[1]]
        elif sn in ("RevoluteUnaligned", "PrismaticUnaligned"):
            kind = "revolute" if sn.startswith("Revolute") else "prismatic"
            axis = tuple(pm.joints[j].extract().axis)
        else:
            raise ValueError(f"{name}: joint {pm.names[j]} of type {sn} not handled by this test")
        inertia = pm.inertias[j]
        links.append(Link(f"L_{pm.names[j]}", inertia.mass, np.array(inertia.lever), np.array(inertia.inertia)))
        parent = "base" if pm.parents[j] == 0 else f"L_{pm.names[pm.parents[j]]}"
        joints.append(Joint(pm.names[j], kind, parent, f"L_{pm.names[j]}",
                            origin=pm.jointPlacements[j].homogeneous, axis=axis))
    model = ArticulatedBody(links, joints, name=name)
    index = np.array([pm.joints[pm.getJointId(d)].idx_q for d in model.dof_names])
    return model, index


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_real_robots_match_pinocchio(robot, rng):
    d = robots_dir()
    if d is None:
        pytest.skip("example-robot-data is not installed")
    pm = pin.buildModelFromUrdf(os.path.join(d, ROBOTS[robot]))
    pd = pm.createData()
    model, idx = from_pinocchio(pm, robot)
    names = ["abia", "jsiia"] + (["cfa"] if robot in SERIAL_ROBOTS else [])
    fs = {name: forward_dynamics(model, algorithm=name) for name in names}
    for _ in range(2):
        q, qd, tau = rng.normal(size=(3, pm.nv))
        ref = pin.aba(pm, pd, q, qd, tau)[idx]
        for name, f in fs.items():
            assert rel(evaluate(f, q[idx], qd[idx], tau[idx]), ref) < TOL_SMALL, name
    if robot not in SERIAL_ROBOTS:
        with pytest.raises(ModelError, match=r"cfa supports serial chains of 1-DOF joints .* branches at link"):
            forward_dynamics(model, algorithm="cfa")


@pytest.mark.parametrize("name", ["aba"] + list(ALGORITHMS))
def test_every_algorithm_drives_an_integrator_or_refuses_in_one_line(name, rng):
    """README's ``--fd`` choices on CHAIN-3 and the panda: an RK4 step (the integrator evaluates the algorithm
    on SX symbols, where JSIIA's former ``ldl`` linear-solver node failed) agrees with ABA's, or the
    Simulator refuses the model in one line naming the joint types the algorithm supports."""
    d = robots_dir()
    robots = [models.chain(3)] + ([pbf.load_urdf(os.path.join(d, ROBOTS["panda"]))] if d else [])
    for model in robots:
        q0 = rng.normal(size=model.nq) * 0.3
        try:
            sim = pbf.Simulator(model, "rk4", dt=0.001, fd=name)
        except ModelError as exc:
            assert name == "cfa" and "\n" not in str(exc) and "1-DOF joints (revolute, prismatic" in str(exc)
            continue
        ref = pbf.Simulator(model, "rk4", dt=0.001, fd="aba")
        assert rel(sim.rollout(q0, steps=3).q[-1], ref.rollout(q0, steps=3).q[-1]) < TOL_SMALL, model.name


# -- depth: formulas against the traced levels ----------------------------------------------------------------

@pytest.mark.parametrize("schedule", [Schedule.SEQUENTIAL, Schedule.PARALLEL])
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_depth_formula_matches_traced_levels(name, schedule):
    alg = ALGORITHMS[name]
    for n in (1, 2, 3, 5, 8, 17):
        lv = Levels()
        alg.build(G.random_chain(n, seed=1), schedule, lv)
        assert lv.depth == alg.depth(n, schedule), (n, lv.summary())


def test_cfa_depth_is_logarithmic_and_abia_linear():
    assert cfa.depth(200) - cfa.depth(100) == 4                 # one more level of each log2 n part
    assert cfa.depth(1024) < 60
    assert abia.depth(200) - abia.depth(100) >= 100             # the ABI recursion: one level per link
    assert jsiia.depth(200) > abia.depth(200)


# -- the same algorithms as generated C ----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_generated_c_matches_casadi(name, rng, tmp_path, monkeypatch):
    from pbframework.codegen.build import BatchRunner, build_shared, load_function
    from pbframework.codegen.emit import emit_c

    monkeypatch.setenv("PBF_CACHE_DIR", str(tmp_path))
    m = G.random_chain(20, seed=4)                     # > 16 elements: several unrolled chunks
    f = forward_dynamics(m, algorithm=name)
    lib = build_shared(emit_c(f, f"test_fd_{name}"))
    g = load_function(lib)
    runner = BatchRunner(lib, f)
    Q, QD, T = rng.normal(size=(3, 5, 20))
    batch = runner(Q, QD, T)[0]
    for k in range(5):
        ref = evaluate(f, Q[k], QD[k], T[k])
        assert rel(evaluate(g, Q[k], QD[k], T[k]), ref) < 1e-13
        assert rel(batch[k], ref) < 1e-13


# -- derivatives ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_jacobians_match_finite_differences(name, rng):
    """CasADi differentiates through the scans, the odd-even levels and the LDL solve."""
    import casadi as ca

    m = G.random_chain(6, seed=2)
    f = forward_dynamics(m, algorithm=name)
    q, qd, tau = ca.MX.sym("q", 6), ca.MX.sym("qd", 6), ca.MX.sym("tau", 6)
    jac = ca.Function("dqdd", [q, qd, tau], [ca.jacobian(f(q, qd, tau), ca.vertcat(q, qd, tau))])
    x = rng.normal(size=18)
    J = np.asarray(jac(x[:6], x[6:12], x[12:]))
    h = 1e-6
    for j in range(18):
        e = np.zeros(18)
        e[j] = h
        fd = (evaluate(f, *np.split(x + e, 3)) - evaluate(f, *np.split(x - e, 3))) / (2 * h)
        assert np.allclose(J[:, j], fd, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(fd).max())), (name, j)
