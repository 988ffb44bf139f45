"""Property-based fuzzing of :func:`pbframework.load_mjcf` (issue 27, MJCF): mutations of MJCF files of our
own (an arm with all four actuator kinds and passive forces, a free base with a ball joint, a four-bar with
equality constraints and a free box, CHAIN-3, the Menagerie-style arm7) — numbers replaced by NaN, inf,
1e308, negatives, text; attributes and elements deleted or duplicated; joint, geom and actuator types
changed; equality constraints and tendons added; odd encodings; deep nesting; truncated files; many bodies.
MuJoCo's compiler reads each file first, so most malformed inputs end as its own message; the property is the
same as the URDF fuzz's: a model with a finite positive-definite mass matrix or one
:class:`pbframework.PbfError`, within the per-case bound (``tests/_fuzz.py``). The fast profile runs in CI;
the long one is marked ``slow``.
"""

from __future__ import annotations

import os
import sys
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pbframework as pbf

from _fuzz import apply_tail, check_mass_matrix_pd, file_tails, long_profile, profile, run_case, write_report

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_mjcf_mujoco import ARM, FREE, LOOPS  # noqa: E402

SOURCES = (("arm", ARM), ("free", FREE), ("loops", LOOPS), ("chain3", (ROOT / "tests/data/chain3.xml").read_text()),
           ("arm7", (ROOT / "examples/data/arm7.xml").read_text()))
"""MJCF files the mutations start from (all load unmutated)."""

NUMBERS = ("nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e-308", "0", "-0", "-1", "-1e9", "1e300 1e300 1e300",
           "abc", "", "1 2", "1e400", "0x10", " 1 ", "\t", "0 0 0 0")
TYPES = {"joint": ("hinge", "slide", "ball", "free", "planar", ""), "geom": ("sphere", "box", "capsule", "mesh",
                                                                          "plane", "cylinder", "ellipsoid", "x"),
         "general": ("filter", "integrator", "muscle", "none")}
EXTRAS = ('<equality><connect body1="{b}" body2="world" anchor="0 0 0"/></equality>',
          '<equality><weld body1="{b}"/></equality>',
          '<equality><joint joint1="{j}"/></equality>',
          '<tendon><fixed name="t"><joint joint="{j}" coef="1"/></fixed></tendon>',
          '<tendon><fixed name="t" range="-1 1" stiffness="2"><joint joint="{j}" coef="1"/></fixed></tendon>',
          '<actuator><motor joint="{j}" gear="1e308"/></actuator>',
          '<actuator><position joint="{j}" kp="-5" dyntype="filter"/></actuator>',
          '<option density="1.2" wind="1 0 0"/>',
          '<option gravity="nan 0 0"/>',
          '<option><flag constraint="disable" gravity="disable"/></option>',
          '<compiler angle="radian" balanceinertia="true"/>')
ENCODINGS = ("utf-8", "UTF-16", "latin-1", "klingon", "utf-32", "", "x" * 50)


@st.composite
def mutations(draw):
    ops = st.one_of(
        st.tuples(st.just("number"), st.integers(0, 10_000), st.sampled_from(NUMBERS)),
        st.tuples(st.just("delete_attribute"), st.integers(0, 10_000), st.integers(0, 10)),
        st.tuples(st.just("delete_element"), st.integers(0, 10_000)),
        st.tuples(st.just("duplicate_element"), st.integers(0, 10_000)),
        st.tuples(st.just("type"), st.sampled_from(sorted(TYPES)), st.integers(0, 10_000), st.data()),
        st.tuples(st.just("extra"), st.sampled_from(EXTRAS)),
        st.tuples(st.just("nest"), st.integers(0, 10_000), st.sampled_from((10, 2_000, 200_000))),
        st.tuples(st.just("bodies"), st.sampled_from((30, 300, 2_000))),
    )
    tail = file_tails(ENCODINGS)
    return draw(st.integers(0, len(SOURCES) - 1)), draw(st.lists(ops, min_size=1, max_size=4)), draw(tail)


def _pick(items: list, k: int):
    return items[k % len(items)] if items else None


def _mutate(text: str, ops: list, tail) -> bytes:
    root = ET.fromstring(text)
    deep = 0
    for op in ops:
        elements = list(root.iter())
        kind = op[0]
        if kind == "number":
            el = _pick([e for e in elements if e.attrib], op[1])
            if el is not None:
                el.set(sorted(el.attrib)[op[1] % len(el.attrib)], op[2])
        elif kind == "delete_attribute":
            el = _pick([e for e in elements if e.attrib], op[1])
            if el is not None:
                del el.attrib[sorted(el.attrib)[op[2] % len(el.attrib)]]
        elif kind in ("delete_element", "duplicate_element"):
            pc = _pick([(p, c) for p in elements for c in p], op[1])
            if pc is not None:
                p, c = pc
                p.remove(c) if kind == "delete_element" else p.append(ET.fromstring(ET.tostring(c)))
        elif kind == "type":
            el = _pick(list(root.iter(op[1])), op[2])
            if el is not None:
                attr = "dyntype" if op[1] == "general" else "type"
                el.set(attr, op[3].draw(st.sampled_from(TYPES[op[1]])))
        elif kind == "extra":
            body = _pick([b.get("name") for b in root.iter("body") if b.get("name")], 0) or "world"
            joint = _pick([j.get("name") for j in root.iter("joint") if j.get("name")], 0) or "none"
            root.append(ET.fromstring(op[1].format(b=body, j=joint)))
        elif kind == "nest":
            el = _pick(elements, op[1])
            if el is not None:
                inner = el
                for _ in range(op[2] if op[2] <= 10 else 0):
                    inner = ET.SubElement(inner, "body")
                if op[2] > 10:
                    deep = max(deep, op[2])
        elif kind == "bodies":
            wb = root.find("worldbody")
            parent = wb if wb is not None else ET.SubElement(root, "worldbody")
            for k in range(op[1]):            # a chain, or past 300 a forest (ElementTree recurses per level)
                b = ET.SubElement(parent, "body", name=f"fuzz{k}", pos="0 0 0.1")
                ET.SubElement(b, "joint", name=f"fuzz_j{k}", axis="0 1 0")
                ET.SubElement(b, "geom", type="sphere", size="0.02")
                parent = b if op[1] <= 300 else parent
    text = ET.tostring(root, encoding="unicode")
    if deep:
        i = text.index(">") + 1
        text = text[:i] + "<default>" * deep + "</default>" * deep + text[i:]
    return apply_tail(text, tail)


def _load(path: Path) -> pbf.ArticulatedBody:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # UnsupportedGeoms / EqualityDisabled name elements; not failures
        return pbf.load_mjcf(path)


def _fuzz(tmp_path_factory, case, name: str) -> None:
    index, ops, tail = case
    label, text = SOURCES[index]
    data = _mutate(text, ops, tail)
    path = tmp_path_factory.mktemp("mjcf") / "robot.xml"
    path.write_bytes(data)
    run_case(name, lambda: _load(path), check_mass_matrix_pd, f"{label} with {ops} then {tail}")


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    write_report()


@given(case=mutations())
@profile("mjcf", long=os.environ.get("PBF_FUZZ") == "long")
def test_mutated_mjcf_loads_or_fails_cleanly(tmp_path_factory, case):
    _fuzz(tmp_path_factory, case, "mjcf")


@pytest.mark.slow
@given(case=mutations())
@profile("mjcf", long=True)
@long_profile
def test_mutated_mjcf_long_profile(tmp_path_factory, case):
    _fuzz(tmp_path_factory, case, "mjcf_long")


def test_the_unmutated_sources_load(tmp_path):
    for label, text in SOURCES:
        path = tmp_path / f"{label}.xml"
        path.write_text(text)
        check_mass_matrix_pd(_load(path))
