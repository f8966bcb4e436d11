"""Packaging: the wheel carries every module and the one catalog (the top-level upstream_templates/ folder),
and an installed copy finds the catalog inside the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "upstream_templates"


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(ROOT / "pyproject.toml", "rb") as fh:
        data: dict = tomllib.load(fh)
    return data


def test_every_package_is_listed() -> None:
    """``packages`` is a list (so the catalog can be mapped in): a new package under gguftpl/ must join it,
    or the wheel would silently leave it out."""
    cfg = _pyproject()["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "gguftpl").rglob("__init__.py")} | {
        "gguftpl.upstream_templates"
    }
    assert sorted(cfg["packages"]) == sorted(on_disk)
    assert cfg["package-dir"] == {"gguftpl.upstream_templates": "upstream_templates"}


def test_built_wheel_carries_the_catalog_and_an_installed_copy_finds_it(tmp_path: Path) -> None:
    import setuptools

    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.skip(f"setuptools {setuptools.__version__} has no built-in bdist_wheel (the dev extra needs 70.1)")
    # a copy of what the build reads, so the build leaves nothing (build/, *.egg-info) in the checkout
    src = tmp_path / "src"
    for name in ("gguftpl", "upstream_templates"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    # offline: the environment's own setuptools, no index
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp_path / "dist")]
    subprocess.run([*build, str(src)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("gguftpl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    catalog = {
        f"gguftpl/upstream_templates/{p.relative_to(CATALOG).as_posix()}" for p in CATALOG.rglob("*") if p.is_file()
    }
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "gguftpl").rglob("*.py")}
    assert catalog <= names and modules <= names
    assert {"gguftpl/upstream_templates/index.json", "gguftpl/upstream_templates/README.md"} <= catalog
    ollama = {
        f"gguftpl/engines/ollama_templates/{n}" for n in ("ollama-index.json", "chatml.gotmpl", "LICENSE", "SOURCES.md")
    }
    assert ollama <= names  # Ollama's registry ships with its licence and provenance
    assert "gguftpl/report/report.html.j2" in names  # the HTML report's page
    assert not [n for n in names if n.startswith("gguftpl/data/")]

    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)], check=True)
    code = (
        "import gguftpl.upstream.catalog as c; cat = c.load_catalog(); print(c.catalog_dir()); "
        "print(sum(len(e.text(n)) > 0 for e in cat.entries for n in e.templates))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],  # -S: no site-packages, so not the editable install
        cwd=tmp_path,
        env={"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == str(site / "gguftpl" / "upstream_templates")
    assert int(out[1]) == len(list(CATALOG.rglob("*.jinja")))  # every template read back, sha256 checked
