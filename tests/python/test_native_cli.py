"""The installed `vcpulab` command is a native binary (crates/vcpulab-cli) that runs
`vcpulab run FILE --json` itself and hands every other command line to `python -m vcpulab`.
Both share the core's command-line contract (vcpulab_core::contract); these tests hold
the native command to the Python CLI: the same stdout, stderr and exit status, byte for
byte, on the forms it runs (their errors included) and on those it hands over.

Every process a test starts runs in a process group of its own with SIGINT's default
action (the suite may run as a background job, which inherits SIGINT ignored), and the
group is killed in a `finally`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PROGRAM_SCENARIO, VCPULAB, default_sigint, kill_group, run_command, spawn

REPO = Path(__file__).resolve().parents[2]


def _both(*args: str, cwd: Path | None = None, env_extra: dict | None = None):
    """(native command, `python -m vcpulab`) results of the same command line, as bytes."""
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env.update(env_extra or {})
    kw = dict(capture_output=True, cwd=cwd, env=env, timeout=120, stdin=subprocess.DEVNULL)
    native = run_command([VCPULAB, *args], **kw)
    python = run_command([sys.executable, "-m", "vcpulab", *args], **kw)
    return native, python


def _same(native, python) -> None:
    assert (native.returncode, native.stderr, native.stdout) == (python.returncode, python.stderr, python.stdout)


def test_the_command_is_the_native_binary():
    with open(VCPULAB, "rb") as f:
        head = f.read(4)
    # A console script of pip starts with "#!"; the native command is an executable file.
    assert head != b"#!", f"{VCPULAB} is a script, not the native vcpulab command"
    assert head in (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe") or head[:2] == b"MZ", head


@pytest.fixture
def scenarios(tmp_path: Path) -> dict[str, Path]:
    toml = tmp_path / "program.toml"
    toml.write_text(PROGRAM_SCENARIO, encoding="utf-8")
    crlf = tmp_path / "crlf.toml"
    crlf.write_bytes(PROGRAM_SCENARIO.replace("\n", "\r\n").encode())
    import json

    import vcpulab  # noqa: F401
    from conftest import program_dict

    js = tmp_path / "program.JSON"
    js.write_text(json.dumps(program_dict()), encoding="utf-8")
    bad_key = tmp_path / "bad.toml"
    bad_key.write_text(PROGRAM_SCENARIO.replace("vcpus = 4\nweight", "vcpuz = 4\nweight"), encoding="utf-8")
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes(b"name = \"caf\xe9\"\n")
    huge = tmp_path / "huge.toml"
    huge.write_text(PROGRAM_SCENARIO.replace('duration = "500ms"', 'duration = "1000000s"'), encoding="utf-8")
    assert huge.read_text() != PROGRAM_SCENARIO and bad_key.read_text() != PROGRAM_SCENARIO
    return {"toml": toml, "crlf": crlf, "json": js, "bad": bad_key, "latin1": latin1, "huge": huge}


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{toml}", "--json"],
        ["run", "--json", "{toml}", "--seed", "3", "--check-invariants"],
        ["run", "{toml}", "--json", "--seed=9223372036854775807"],
        ["run", "{crlf}", "--json"],
        ["run", "{json}", "--json", "--force"],
    ],
)
def test_runs_it_runs_give_the_python_clis_bytes(scenarios, args):
    line = [a.format(**scenarios) for a in args]
    native, python = _both(*line)
    assert native.returncode == 0, native.stderr
    assert native.stdout.startswith(b"{\n")
    _same(native, python)


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["run", "{toml}"],                                 # tables (Python formats them)
        ["run", "{toml}", "--js"],                         # abbreviation (argparse)
        ["run", "{toml}", "--json", "--seed", "0x10"],     # int(text, 0)
        ["run", "{toml}", "--json", "--seed", "010"],      # refused by int(text, 0)
        ["run", "{toml}", "--json", "--seed", "-1"],
        ["run", "{toml}", "{crlf}", "--json"],             # two scenarios
        ["run", "{bad}", "--json"],                        # bad input: Python's message
        ["run", "{latin1}", "--json"],                     # not UTF-8
        ["run", "{huge}", "--json"],                       # refused as estimated at hours
        ["run", "/nonexistent/x.toml", "--json"],
        ["validate", "{toml}"],
        ["nosuch"],
    ],
)
def test_what_it_hands_to_python_ends_as_in_python(scenarios, args):
    line = [a.format(**scenarios) for a in args]
    native, python = _both(*line)
    _same(native, python)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{bad}", "--json"],
        ["run", "{latin1}", "--json"],
        ["run", "{huge}", "--json"],
        ["run", "{missing}", "--json"],
        ["run", "{folder}", "--json"],
        ["run", "", "--json"],
        ["run", "{toml}", "--json", "--seed", "0x10"],
        ["run", "{toml}", "--json", "--seed", "1_0"],
        ["run", "{toml}", "--json", "--seed", " 7 "],
        ["run", "{toml}", "--json", "--seed=-0"],
        ["run", "{toml}", "--json", "--seed", "+5"],
        ["run", "{toml}", "--json", "--seed", "\u0661\u0662"],  # Arabic-Indic 12
    ],
)
def test_the_runs_it_takes_end_as_in_python_without_python(scenarios, tmp_path: Path, args):
    """The core's contract gives both commands the same seeds, file reading and error
    lines: the native command ends these runs and their errors itself, as Python would."""
    line = [a.format(**scenarios, missing=tmp_path / "nope.toml", folder=tmp_path) for a in args]
    native, python = _both(*line)
    _same(native, python)
    no_python = tmp_path / "no-python"
    no_python.write_text("#!/bin/sh\nexit 7\n")
    no_python.chmod(0o755)
    env = dict(os.environ, VCPULAB_PYTHON=str(no_python))
    env.pop("PYTHONWARNINGS", None)
    alone = run_command([VCPULAB, *line], capture_output=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    _same(alone, python)


def test_hands_over_every_argument_to_the_chosen_interpreter(tmp_path: Path):
    fake = tmp_path / "fake-python"
    fake.write_text('#!/bin/sh\nprintf "%s|" "$@"\nexit 7\n')
    fake.chmod(0o755)
    env = dict(os.environ, VCPULAB_PYTHON=str(fake))
    p = run_command([VCPULAB, "validate", "a b.toml", "--force"], capture_output=True, env=env, timeout=60)
    assert p.returncode == 7
    flag, code, *rest = p.stdout.decode().split("|")[:-1]
    assert (flag, rest) == ("-c", ["validate", "a b.toml", "--force"])
    assert "from vcpulab.cli import exit_with, main" in code and "exit_with(main())" in code
    # The form it runs itself does not start Python at all.
    p = run_command([VCPULAB, "--version"], capture_output=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith(b"vcpulab ")


def test_the_source_distribution_builds_the_command_too(tmp_path: Path):
    """maturin's sdist alone lacks the command's crate, this backend and the scenario
    files the core compiles in; the backend's build_sdist adds them (a wheel from the
    sdist was checked to build and install by hand: ~2 min, too slow for the suite)."""
    pytest.importorskip("maturin")
    import shutil
    import tarfile

    if shutil.which("maturin") is None and not (Path(sys.executable).parent / "maturin").exists():
        pytest.skip("the maturin command is not installed")
    # A clean copy of the tracked files: no build/ left by an install.
    src = tmp_path / "src"
    listed = run_command(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, src / rel)
    out = tmp_path / "dist"
    env_path = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    code = ("import sys; sys.path.insert(0, 'build_backend'); import vcpulab_build; "
            f"print(vcpulab_build.build_sdist({str(out)!r}))")
    p = run_command([sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=300,
                    env=dict(os.environ, PATH=env_path))
    assert p.returncode == 0, p.stderr[-2000:]
    name = p.stdout.strip().splitlines()[-1]
    assert sorted(os.listdir(out)) == [name]  # no temporary file left
    with tarfile.open(out / name) as tar:
        names = set(tar.getnames())
        root = sorted(names)[0].split("/")[0]
        cargo = tar.extractfile(f"{root}/Cargo.toml").read().decode()
        added = tar.getmember(f"{root}/crates/vcpulab-cli/src/main.rs")
        assert (added.uid, added.uname, added.mtime) == (0, "", tar.getmember(f"{root}/Cargo.toml").mtime)
    for rel in ("build_backend/vcpulab_build.py", "crates/vcpulab-cli/src/main.rs", "crates/vcpulab-cli/Cargo.toml",
                "scenarios/reproductions/software-ft/scenario.toml", "crates/vcpulab-core/src/engine/mod.rs"):
        assert f"{root}/{rel}" in names, rel
    assert '"crates/vcpulab-cli"' in cargo


def test_a_vcpulab_module_in_the_working_directory_does_not_shadow_the_package(tmp_path: Path, scenarios):
    (tmp_path / "vcpulab.py").write_text("raise SystemExit('the user script ran')\n")
    p = run_command([VCPULAB, "validate", str(scenarios["toml"])], capture_output=True, text=True,
                    cwd=tmp_path, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("OK "), (p.stdout, p.stderr)


def test_a_scenario_on_a_pipe_is_read_once(scenarios):
    """Not a regular file: handed over unread, so Python's message is about its text."""
    bad = scenarios["bad"].read_bytes()
    kw = dict(capture_output=True, input=bad, timeout=60)
    native = run_command([VCPULAB, "run", "/dev/stdin", "--json"], **kw)
    python = run_command([sys.executable, "-m", "vcpulab", "run", "/dev/stdin", "--json"], **kw)
    assert native.returncode == 2 and b"vcpuz" in native.stderr, native.stderr
    _same(native, python)
    good = run_command([VCPULAB, "run", "/dev/stdin", "--json"], capture_output=True, timeout=60,
                       input=scenarios["toml"].read_bytes())
    assert good.returncode == 0 and good.stdout.startswith(b"{\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_failed_write_is_an_error_not_silence(scenarios):
    with open("/dev/full", "wb") as full:
        native = run_command([VCPULAB, "run", str(scenarios["toml"]), "--json"], stdout=full,
                             stderr=subprocess.PIPE, timeout=60)
        python = run_command([sys.executable, "-m", "vcpulab", "run", str(scenarios["toml"]), "--json"],
                             stdout=full, stderr=subprocess.PIPE, timeout=60)
    assert native.returncode == 2 and native.stderr.startswith(b"vcpulab: error: [Errno 28] "), native.stderr
    assert (native.returncode, native.stderr) == (python.returncode, python.stderr)


def _wait_until_in_the_run(pid: int) -> None:
    """Until the process has used 1.5 s of CPU: past Python's start and imports (~0.3 s)
    and the scenario's parse, into the run, however loaded the machine is. (A SIGINT
    during Python's imports would give a traceback instead of the CLI's message.)"""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():  # no procfs (macOS): a generous fixed wait
        time.sleep(5.0)
        return
    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended
            return
        if (int(fields[11]) + int(fields[12])) / tick >= 1.5:  # utime + stime
            return
        time.sleep(0.05)


def _interrupted(cmd: list, ignore_sigint: bool = False, wait: float = 20.0) -> subprocess.CompletedProcess:
    """Starts a run that would take hours, sends it SIGINT once it is under way, and
    returns how it ended (or kills it if it did not end within ``wait`` s: returncode None).
    The run gets SIGINT's default action, as from an interactive shell, whatever this test
    run inherited; with ``ignore_sigint``, ignored, as a background job of a
    non-interactive shell has it."""
    def ignore():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    p = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
              preexec_fn=ignore if ignore_sigint else default_sigint)
    try:
        _wait_until_in_the_run(p.pid)
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=wait)
            return subprocess.CompletedProcess(cmd, p.returncode, out, err)
        except subprocess.TimeoutExpired:
            kill_group(p)
            out, err = p.communicate()
            return subprocess.CompletedProcess(cmd, None, out, err)
    finally:
        kill_group(p)
        p.wait()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT handling is Unix-only")
def test_ctrl_c_ends_a_run_at_once_as_in_python(scenarios):
    """The run stops within the 20 s allowed (it would take hours), with the Python
    CLI's line and end, and nothing on stdout. Through Python this needs the
    extension to run the interpreter's signal handlers during the run."""
    args = ["run", str(scenarios["huge"]), "--json", "--force"]
    native = _interrupted([VCPULAB, *args])
    python = _interrupted([sys.executable, "-m", "vcpulab", *args])
    # Ended by SIGINT after the message (a shell reports 130 and stops its loop).
    assert (native.returncode, native.stderr, native.stdout) == (-signal.SIGINT, b"vcpulab: interrupted\n", b"")
    _same(native, python)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT handling is Unix-only")
def test_an_ignored_sigint_stays_ignored(scenarios):
    native = _interrupted([VCPULAB, "run", str(scenarios["huge"]), "--json", "--force"], ignore_sigint=True, wait=2.0)
    assert native.returncode is None, (native.returncode, native.stderr)


def _first_child(pid: int) -> int | None:
    """The first child process of ``pid``, once it has one (Linux's /proc), else None."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + 60
    while children.exists() and time.monotonic() < deadline:
        pids = children.read_text().split()
        if pids:
            return int(pids[0])
        time.sleep(0.05)
    return None


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT handling is Unix-only")
def test_ctrl_c_stops_a_shell_loop_of_runs(scenarios, tmp_path: Path):
    """Both CLIs end by SIGINT after their message, so the calling shell sees the Ctrl-C
    and leaves its loop (an exit(130) would make bash go on to the next iteration)."""
    import shutil
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash")
    for cli in (f'"{VCPULAB}"', f'"{sys.executable}" -m vcpulab'):
        log = tmp_path / "loop.log"
        loop = (f'for i in 1 2; do echo "start $i" >> "{log}"; {cli} run "{scenarios["huge"]}" --json --force '
                f'> /dev/null; done; echo "after the loop" >> "{log}"')
        # bash -c runs the loop with job control off: the commands get SIGINT as from a
        # terminal's Ctrl-C (sent here to the whole process group). The shell starts with
        # SIGINT's default action: one that starts with it ignored cannot undo that.
        p = spawn([bash, "-c", loop], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            child = _first_child(p.pid)
            if child is None:
                pytest.skip("cannot see the loop's child process (no /proc children file)")
            _wait_until_in_the_run(child)
            os.killpg(p.pid, signal.SIGINT)
            _, err = p.communicate(timeout=30)
        finally:
            kill_group(p)
            p.wait()
        assert log.read_text() == "start 1\n", (cli, log.read_text(), err)
        assert p.returncode == 128 + signal.SIGINT or p.returncode == -signal.SIGINT, (cli, p.returncode, err)
        log.unlink()
