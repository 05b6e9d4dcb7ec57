"""What PyPI checks on upload, checked before an upload: classifiers, license, URLs,
and the metadata of a wheel built from this tree (``make dist-check`` also builds the
sdist in a clean environment and runs ``twine check``)."""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli", reason="tomli reads pyproject.toml on Python 3.10")


def _project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]


def test_every_classifier_is_one_pypi_accepts() -> None:
    trove = pytest.importorskip(
        "trove_classifiers", reason="trove-classifiers is in the dev extra (`make test`)"
    )
    declared = _project()["classifiers"]
    unknown = [c for c in declared if c not in trove.classifiers]
    assert not unknown, f"PyPI rejects uploads with unknown classifiers: {unknown}"
    deprecated = [c for c in declared if c in trove.deprecated_classifiers]
    assert not deprecated, f"deprecated classifiers: {deprecated}"
    # PEP 639: with a license expression, a "License ::" classifier is an error
    assert not [c for c in declared if c.startswith("License ::")]


def test_the_license_is_mit_and_shipped() -> None:
    project = _project()
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "langgraph-ctx maintainers" in text


def test_the_project_links_to_its_home() -> None:
    urls = _project()["urls"]
    assert set(urls) >= {"Homepage", "Repository", "Issues", "Documentation"}
    assert all(u.startswith("https://") for u in urls.values())


def test_the_server_extra_is_declared_and_in_dev() -> None:
    extras = _project()["optional-dependencies"]
    (server,) = extras["server"]
    assert server.startswith("langgraph-cli[inmem]")
    assert server in extras["dev"]


def _wheel_metadata(wheel: Path) -> tuple[Message, list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(zf.read(meta).decode()), names


def test_a_wheel_built_from_this_tree_carries_what_pypi_needs(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="build is in the dev extra (`make test`)")
    pytest.importorskip("twine", reason="twine is in the dev extra (`make test`)")
    # A copy, so the build leaves nothing in the work tree. No isolation: this venv's
    # setuptools is enough and the test stays offline (`make dist-check` isolates).
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(
        ROOT / "langgraph_ctx", src / "langgraph_ctx", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if built.returncode and "Missing dependencies" in built.stdout + built.stderr:
        pytest.skip(f"build backend not installed here:\n{built.stdout[-2000:]}")
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    (wheel,) = out.glob("*.whl")

    meta, names = _wheel_metadata(wheel)
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert meta.get_all("Classifier") == _project()["classifiers"]
    urls = {
        label: url
        for label, url in (str(u).split(", ", 1) for u in meta.get_all("Project-URL", []))
    }
    assert urls == _project()["urls"]
    assert meta["Description-Content-Type"] == "text/markdown"
    assert "server" in meta.get_all("Provides-Extra", [])
    assert "langgraph_ctx/server.py" in names and "langgraph_ctx/py.typed" in names

    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "PASSED" in checked.stdout
