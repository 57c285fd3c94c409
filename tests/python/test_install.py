"""One install (issue 30): `pip install .` brings every package a README command imports;
only Ray is an extra. Checked against the source, so a new import of a package that is
not a dependency fails here rather than on a user's fresh install."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "vcpulab"
# Imported only behind an option that names its own install line (`--engine ray`).
EXTRAS_ONLY = {"ray"}
# The distribution name of an import name, where they differ.
DISTRIBUTION = {"yaml": "pyyaml"}


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirement_name(req: str) -> str:
    return re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()


def _third_party_imports() -> dict[str, str]:
    """Top-level names imported anywhere in the package (module or function level) that
    are neither the standard library nor vcpulab itself, each with a file importing it."""
    std = set(sys.stdlib_module_names)
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in std and top != "vcpulab":
                    found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def test_every_package_the_commands_import_is_a_dependency():
    project = _pyproject()["project"]
    deps = {_requirement_name(r) for r in project["dependencies"]}
    imports = _third_party_imports()
    # The scan sees what `query`, `report` and the tables need.
    assert {"duckdb", "matplotlib", "pandas"} <= set(imports), imports
    missing = {name: where for name, where in imports.items()
               if name not in EXTRAS_ONLY and DISTRIBUTION.get(name, name) not in deps}
    assert not missing, f"imported but not in [project] dependencies: {missing}"
    # pyarrow is reached through pandas (to_parquet), not imported by name.
    assert "pyarrow" in deps


def test_ray_stays_an_extra_and_old_extras_still_install():
    project = _pyproject()["project"]
    deps = {_requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert "ray" not in deps
    assert {_requirement_name(r) for r in extras["ray"]} == {"ray"}
    # `pip install '.[sweep,report]'` from older notes must still resolve.
    for name in ("sweep", "report", "parquet", "test"):
        assert name in extras, name


def test_no_hint_asks_for_an_extra_that_rebuilds_the_core():
    """A missing-package message names the package: `pip install 'vcpulab[sweep]'` would
    rebuild the Rust core (minutes) to add a Python package."""
    texts = [p.read_text() for p in PACKAGE.rglob("*.py")]
    texts += [(ROOT / "README.md").read_text(), (ROOT / "docs" / "sweeps.md").read_text()]
    for text in texts:
        assert not re.search(r"pip install '(vcpulab|\.)\[(sweep|report|parquet)", text)
