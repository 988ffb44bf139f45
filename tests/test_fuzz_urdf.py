"""Property-based fuzzing of :func:`pbframework.load_urdf` (issue 27): mutations of real robots'
URDF files from example-robot-data — numbers replaced by NaN, inf, 1e308, negatives, text; attributes and
elements deleted or duplicated; joint types and link references changed (broken trees, cycles); odd
encodings; deep nesting; truncated files; many links. Every outcome is a model with a finite
positive-definite mass matrix or one :class:`pbframework.PbfError`, within the per-case bound
(``tests/_fuzz.py``). The fast profile runs in CI; the long one is marked ``slow``.
"""

from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pbframework as pbf

from _fuzz import apply_tail, check_mass_matrix_pd, file_tails, long_profile, profile, run_case, write_report

ROBOTS = ("double_pendulum_description/urdf/double_pendulum.urdf", "ur_description/urdf/ur5_robot.urdf",
          "panda_description/urdf/panda.urdf", "so_arm_description/urdf/so100.urdf",
          "solo_description/robots/solo12.urdf")
"""Small real robots the mutations start from (all load unmutated)."""

NUMBERS = ("nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e-308", "0", "-0", "-1", "-1e9", "1e300 1e300 1e300",
           "abc", "", "1 2", "1e400", "0x10", "1_000", " 1 ", "\t")
ENCODINGS = ("utf-8", "UTF-16", "latin-1", "ascii", "klingon", "utf-32", "cp1252", "", "utf-8-sig", "x" * 50)
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar", "spherical", "", "REVOLUTE",
               "ball")


def _source(robots_dir: Path, index: int) -> ET.ElementTree:
    return ET.parse(robots_dir / ROBOTS[index % len(ROBOTS)])


@st.composite
def mutations(draw):
    """A list of mutation operations, applied in order by :func:`_mutate`."""
    ops = st.one_of(
        st.tuples(st.just("number"), st.integers(0, 10_000), st.sampled_from(NUMBERS)),
        st.tuples(st.just("delete_attribute"), st.integers(0, 10_000), st.integers(0, 10)),
        st.tuples(st.just("delete_element"), st.integers(0, 10_000)),
        st.tuples(st.just("duplicate_element"), st.integers(0, 10_000)),
        st.tuples(st.just("joint_type"), st.integers(0, 10_000), st.sampled_from(JOINT_TYPES)),
        st.tuples(st.just("relink"), st.integers(0, 10_000), st.integers(0, 10_000),
                  st.sampled_from(("parent", "child"))),
        st.tuples(st.just("axis"), st.integers(0, 10_000), st.sampled_from(("1e200 1e200 0", "1e-200 0 0", "0 0 0",
                                                                          "1e308 1e308 1e308", "nan 0 1", "1 0"))),
        st.tuples(st.just("limits"), st.integers(0, 10_000), st.sampled_from(("1", "-1", "inf", "-inf", "nan")),
                  st.sampled_from(("-1", "1", "inf", "-inf", "nan"))),
        st.tuples(st.just("inertia_scale"), st.integers(0, 10_000),
                  st.sampled_from(("1e300", "1e-300", "-1", "1e154"))),
        st.tuples(st.just("nest"), st.integers(0, 10_000), st.sampled_from((10, 2_000, 200_000))),
        st.tuples(st.just("chain"), st.sampled_from((50, 3_000))),
    )
    tail = file_tails(ENCODINGS)
    return draw(st.integers(0, len(ROBOTS) - 1)), draw(st.lists(ops, min_size=1, max_size=4)), draw(tail)


def _pick(items: list, k: int):
    return items[k % len(items)] if items else None


def _mutate(tree: ET.ElementTree, ops: list, tail) -> bytes:
    root = tree.getroot()
    deep = 0                                    # nesting too deep for ElementTree's serialiser: raw text below
    for op in ops:
        elements = [e for e in root.iter()]
        kind = op[0]
        if kind == "number":
            el = _pick([e for e in elements if e.attrib], op[1])
            if el is not None:
                key = sorted(el.attrib)[op[1] % len(el.attrib)]
                el.set(key, op[2])
        elif kind == "delete_attribute":
            el = _pick([e for e in elements if e.attrib], op[1])
            if el is not None:
                del el.attrib[sorted(el.attrib)[op[2] % len(el.attrib)]]
        elif kind in ("delete_element", "duplicate_element"):
            parents = [(p, c) for p in elements for c in p]
            pc = _pick(parents, op[1])
            if pc is not None:
                p, c = pc
                if kind == "delete_element":
                    p.remove(c)
                else:
                    p.append(ET.fromstring(ET.tostring(c)))
        elif kind == "joint_type":
            j = _pick(root.findall("joint"), op[1])
            if j is not None:
                j.set("type", op[2])
        elif kind == "relink":
            j, link = _pick(root.findall("joint"), op[1]), _pick(root.findall("link"), op[2])
            ref = None if j is None else j.find(op[3])
            if ref is not None and link is not None:
                ref.set("link", link.get("name", ""))
        elif kind == "axis":
            j = _pick(root.findall("joint"), op[1])
            if j is not None:
                (j.find("axis") if j.find("axis") is not None else ET.SubElement(j, "axis")).set("xyz", op[2])
        elif kind == "limits":
            j = _pick(root.findall("joint"), op[1])
            if j is not None:
                lim = j.find("limit") if j.find("limit") is not None else ET.SubElement(j, "limit")
                lim.set("lower", op[2])
                lim.set("upper", op[3])
        elif kind == "inertia_scale":
            inertia = _pick(root.findall("link/inertial/inertia"), op[1])
            if inertia is not None:
                for key in list(inertia.attrib):
                    try:
                        inertia.set(key, repr(float(inertia.get(key)) * float(op[2])))
                    except ValueError:
                        pass
        elif kind == "nest":
            el = _pick(elements, op[1])
            if el is not None:
                inner = el
                for _ in range(op[2] if op[2] <= 10 else 0):
                    inner = ET.SubElement(inner, "nest")
                if op[2] > 10:
                    deep = max(deep, op[2])
        elif kind == "chain":
            last = _pick(root.findall("link"), 0)
            for k in range(op[1]):
                name = f"fuzz_link{k}"
                link = ET.SubElement(root, "link", name=name)
                inertial = ET.SubElement(link, "inertial")
                ET.SubElement(inertial, "mass", value="0.1")
                ET.SubElement(inertial, "inertia", ixx="1e-3", ixy="0", ixz="0", iyy="1e-3", iyz="0", izz="1e-3")
                j = ET.SubElement(root, "joint", name=f"fuzz_joint{k}", type="revolute")
                ET.SubElement(j, "parent", link=last.get("name") or "")   # a mutation may have deleted it
                ET.SubElement(j, "child", link=name)
                ET.SubElement(j, "origin", xyz="0 0 0.1")
                ET.SubElement(j, "axis", xyz="0 1 0")
                last = link
    text = ET.tostring(root, encoding="unicode")
    if deep and "<robot" in text:
        i = text.index(">", text.index("<robot")) + 1
        text = text[:i] + "<n>" * deep + "</n>" * deep + text[i:]
    return apply_tail(text, tail)


def _load(path: Path) -> pbf.ArticulatedBody:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # InertiaMerged / InertiaBalanced name links; not failures
        return pbf.load_urdf(path)


def _fuzz(robots_dir: Path, tmp_path_factory, case, name: str) -> None:
    index, ops, tail = case
    data = _mutate(_source(robots_dir, index), ops, tail)
    path = tmp_path_factory.mktemp("urdf") / "robot.urdf"
    path.write_bytes(data)
    run_case(name, lambda: _load(path), check_mass_matrix_pd, f"{ROBOTS[index]} with {ops} then {tail}")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    write_report()


@given(case=mutations())
@profile("urdf", long=os.environ.get("PBF_FUZZ") == "long")
def test_mutated_urdf_loads_or_fails_cleanly(robots_dir, tmp_path_factory, case):
    _fuzz(robots_dir, tmp_path_factory, case, "urdf")


@pytest.mark.slow
@given(case=mutations())
@profile("urdf", long=True)
@long_profile
def test_mutated_urdf_long_profile(robots_dir, tmp_path_factory, case):
    _fuzz(robots_dir, tmp_path_factory, case, "urdf_long")


def test_the_unmutated_sources_load(robots_dir):
    """The mutations start from robots that load: a clean error in the fuzz is the mutation's doing."""
    for rel in ROBOTS:
        check_mass_matrix_pd(_load(robots_dir / rel))


@pytest.mark.parametrize("mutation,message", [
    (("number", "encoding"), "unknown XML encoding"),
    (("axis", "1e200 1e200 0"), None),
    (("axis", "nan 0 1"), "expected finite numbers"),
    (("chain", 3_000), "more than the limit of 1000"),
])
def test_issue_examples(robots_dir, tmp_path, mutation, message):
    """The issue's examples, each one outcome: an unknown encoding is a ModelError; an axis whose norm
    overflows is the diagonal, not a null joint; a NaN axis is refused; a model past the link limit is a
    LimitError before anything is built."""
    tree = _source(robots_dir, 0)
    kind, value = mutation
    if kind == "number":
        data = b'<?xml version="1.0" encoding="klingon"?>\n' + ET.tostring(tree.getroot())
    else:
        data = _mutate(tree, [(kind, 0, value)] if kind == "axis" else [(kind, value)], None)
    path = tmp_path / "robot.urdf"
    path.write_bytes(data)
    if message is None:
        model = _load(path)
        axis = model.joints[0].axis
        assert abs(axis[0] - axis[1]) < 1e-15 and abs(abs(axis[0]) - 2 ** -0.5) < 1e-15
        return
    with pytest.raises(pbf.PbfError, match=message):
        _load(path)
