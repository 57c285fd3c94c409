"""The PEP 517 build backend of vcpulab: maturin, plus the native ``vcpulab`` command.

maturin builds the extension module (``vcpulab._native``) and the wheel. It cannot yet
build a Rust executable into the same wheel as a PyO3 module, so before delegating to it
this backend builds ``crates/vcpulab-cli`` (the ``vcpulab`` command: it runs
``vcpulab run FILE --json`` natively and hands every other command line to
``python -m vcpulab``, see its ``main.rs``) and puts the binary in ``build/wheel-data/scripts``,
which ``[tool.maturin] data`` adds to the wheel's ``.data/scripts``: pip installs it into
the environment's ``bin`` (``Scripts`` on Windows) as the ``vcpulab`` command.

The interpreter running this backend is the one pip installs into; its path and version
are compiled into the binary as the fallback it hands commands to (the interpreter beside
the installed binary is tried first).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any, Mapping, Optional

import maturin
from maturin import (  # noqa: F401  (re-exported PEP 517 hooks)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS_DIR = os.path.join(ROOT, "build", "wheel-data", "scripts")  # [tool.maturin] data


def _build_cli() -> None:
    env = dict(os.environ)
    env["VCPULAB_BUILD_PYTHON"] = sys.executable
    env["VCPULAB_BUILD_PYTHON_VERSION"] = "%d.%d" % sys.version_info[:2]
    cmd = ["cargo", "build", "--release", "-p", "vcpulab-cli", "--message-format=json-render-diagnostics"]
    print("Running `%s`" % " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        sys.stderr.write("vcpulab build: building the vcpulab command (crates/vcpulab-cli) failed\n")
        sys.exit(1)
    executable = None
    for line in proc.stdout.decode(errors="replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") \
                and msg.get("target", {}).get("name") == "vcpulab":
            executable = msg["executable"]
    if not executable:
        sys.stderr.write("vcpulab build: cargo reported no `vcpulab` executable\n")
        sys.exit(1)
    _ensure_data_dir()
    target = os.path.join(SCRIPTS_DIR, os.path.basename(executable))
    shutil.copy2(executable, target)


def _ensure_data_dir() -> None:
    # maturin refuses a configured data directory that does not exist, even when it only
    # writes metadata.
    os.makedirs(SCRIPTS_DIR, exist_ok=True)


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, Any]] = None) -> str:
    _ensure_data_dir()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    _build_cli()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    _build_cli()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
