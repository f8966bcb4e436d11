"""The order the suite's modules are handed to the xdist workers (tests/conftest.py): the long ones first."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tests.conftest import LONG_MODULES, ROOT, pytest_collection_modifyitems


@dataclass
class _Item:
    nodeid: str


def test_every_long_module_exists_and_xdist_keeps_the_order() -> None:
    missing = [m for m in LONG_MODULES if not (ROOT / m).is_file()]
    assert not missing, f"LONG_MODULES names modules that are gone: {missing}"
    assert len(set(LONG_MODULES)) == len(LONG_MODULES)
    (addopts,) = re.findall(r'^addopts = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert "--dist loadscope" in addopts and "--no-loadscope-reorder" in addopts  # else xdist sorts by count


def test_long_modules_first_then_by_number_of_tests() -> None:
    long_a, long_b = LONG_MODULES[0], LONG_MODULES[1]
    ids = ["tests/test_a.py::x", "tests/test_b.py::x", "tests/test_b.py::y", f"{long_b}::p", f"{long_a}::q[1]"]
    ids += [f"{long_a}::q[2]", "tests/test_c.py::K::m", "tests/test_c.py::K::n", "tests/test_c.py::z"]
    items = [_Item(i) for i in ids]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        f"{long_a}::q[1]",
        f"{long_a}::q[2]",
        f"{long_b}::p",
        "tests/test_c.py::K::m",  # a module's tests stay together and in their order
        "tests/test_c.py::K::n",
        "tests/test_c.py::z",
        "tests/test_b.py::x",
        "tests/test_b.py::y",
        "tests/test_a.py::x",
    ]
