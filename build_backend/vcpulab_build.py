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

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from typing import Any, Mapping, Optional

import maturin
from maturin import (  # noqa: F401  (re-exported PEP 517 hooks)
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS_DIR = os.path.join(ROOT, "build", "wheel-data", "scripts")  # [tool.maturin] data
CLI_CRATE = "crates/vcpulab-cli"
# What maturin's source distribution leaves out and a build from it needs: this backend,
# the command's crate, and the reproductions' scenario files, which the core compiles in.
SDIST_EXTRA = ["build_backend/vcpulab_build.py", CLI_CRATE + "/Cargo.toml", CLI_CRATE + "/src/main.rs",
               "scenarios/reproductions"]


def _build_cli() -> None:
    env = dict(os.environ)
    env["VCPULAB_BUILD_PYTHON"] = sys.executable
    env["VCPULAB_BUILD_PYTHON_VERSION"] = "%d.%d" % sys.version_info[:2]
    cmd = ["cargo", "build", "--release", "-p", "vcpulab-cli", "--message-format=json-render-diagnostics"]
    if shutil.which("cargo", path=env.get("PATH")) is None:
        sys.stderr.write("vcpulab build: building the vcpulab command needs cargo (a Rust toolchain) "
                         "on the PATH\n")
        sys.exit(1)
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
    # Only this build's binary: nothing stale from an earlier build goes into the wheel.
    shutil.rmtree(SCRIPTS_DIR, ignore_errors=True)
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


def _files_under(path: str) -> list:
    if not os.path.isdir(path):
        return [path]
    found = []
    for top, dirs, files in os.walk(path):
        dirs.sort()
        found.extend(os.path.join(top, f) for f in sorted(files))
    return found


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    """maturin's source distribution, completed: maturin packs only the crates the
    extension depends on and drops the others from the workspace's members, so this adds
    this backend, the command's crate and the reproductions' scenario files (which
    maturin does not see: the core reads them with ``include_str!``)."""
    _ensure_data_dir()
    name = maturin.build_sdist(sdist_directory, config_settings)
    sdist = os.path.join(sdist_directory, name)
    with tarfile.open(sdist, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
    root = members[0][0].name.split("/")[0]
    mtime = members[0][0].mtime  # maturin's fixed time: the sdist stays reproducible
    tmp = sdist + ".tmp"
    try:
        _write_sdist(tmp, root, members, mtime)
        os.replace(tmp, sdist)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return name


def _write_sdist(tmp: str, root: str, members: list, mtime: float) -> None:
    """maturin's members (the workspace's members list completed), then SDIST_EXTRA."""
    done = set()
    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as out:
        for info, data in members:
            if info.name == root + "/Cargo.toml":
                text = data.decode()
                if CLI_CRATE not in text:
                    text = re.sub(r"members\s*=\s*\[", lambda m: m.group(0) + '"%s", ' % CLI_CRATE, text, count=1)
                data = text.encode()
                info.size = len(data)
            done.add(info.name)
            out.addfile(info, io.BytesIO(data) if data is not None else None)
        for rel in SDIST_EXTRA:
            for extra in _files_under(os.path.join(ROOT, rel)):
                arc = root + "/" + os.path.relpath(extra, ROOT).replace(os.sep, "/")
                if arc in done:
                    continue
                info = out.gettarinfo(extra, arcname=arc)
                # As maturin writes its members: no owner, one time.
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = mtime
                info.mode = 0o644
                with open(extra, "rb") as f:
                    out.addfile(info, f)
