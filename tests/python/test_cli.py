"""End-to-end tests of the `vcpulab` command (run as a subprocess, no TTY)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pytest

import vcpulab
from conftest import PROGRAM_SCENARIO, VCPULAB, run_cli, run_command

REPO = Path(__file__).resolve().parents[2]
# The row contract (issue 2) and what issue 26 adds: seeds, the 95% interval, regimes.
ROW_KEYS = {"experiment", "case", "metric", "unit", "paper", "sim", "ratio", "seeds", "ci_low", "ci_high", "regimes"}


def assert_no_traceback(p) -> None:
    assert "Traceback" not in p.stderr, p.stderr
    assert "Traceback" not in p.stdout, p.stdout


# --------------------------------------------------------------------------- basics


def test_version():
    import vcpulab

    p = run_cli("--version")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"vcpulab {vcpulab.__version__}"


def test_help_has_examples():
    p = run_cli("--help")
    assert p.returncode == 0
    assert "examples:" in p.stdout and "vcpulab run scenario.toml" in p.stdout
    for sub in ("run", "validate", "schedulers", "reproduce"):
        h = run_cli(sub, "--help")
        assert h.returncode == 0, h.stderr
        assert "usage: vcpulab " + sub in h.stdout


def test_a_one_command_parser_parses_and_helps_like_the_full_one(capsys):
    """`vcpulab CMD ...` builds only CMD's subparser (for a fast start); it must be the
    same subparser the full parser holds, and COMMANDS must list every subcommand."""
    from vcpulab import cli

    full = cli.build_parser()
    choices = full._subparsers._group_actions[0].choices  # argparse's subparsers action
    assert tuple(choices) == cli.COMMANDS
    for name in cli.COMMANDS:
        one = cli.build_parser(only=name)
        assert tuple(one._subparsers._group_actions[0].choices) == (name,)
        assert one._subparsers._group_actions[0].choices[name].format_help() == choices[name].format_help()
    assert cli._command_named(["run", "x.toml"]) == "run"
    assert cli._command_named(["--help"]) is None
    assert cli._command_named(["--version"]) == ""
    assert cli._command_named(["nosuch"]) is None
    # An unknown command still gets the full list of choices in its error.
    with pytest.raises(SystemExit):
        cli.main(["nosuch"])
    assert "choose from 'run', 'validate'" in capsys.readouterr().err


def test_no_command_is_a_usage_error():
    p = run_cli()
    assert p.returncode == 2
    assert "vcpulab: error:" in p.stderr
    assert_no_traceback(p)


# ------------------------------------------------------------------------------ run


def test_run_prints_readable_summary(program_toml: Path):
    p = run_cli("run", str(program_toml))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "program-mix" in out
    for word in ("VM", "share", "wait s", "halted s", "spin s", "throughput", "loops/s", "bogo-ops/s",
                 "utilization", "context switches", "migrations", "same_socket", "Jain", "events"):
        assert word in out, f"{word!r} missing from:\n{out}"
    for vm in ("app", "hog"):
        assert any(line.startswith(vm) for line in out.splitlines())


def test_run_json_parses(program_toml: Path):
    p = run_cli("run", str(program_toml), "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["scenario"] == "program-mix"
    assert s["scheduler"] == "rr"
    assert s["seed"] == 7
    assert [vm["name"] for vm in s["vms"]] == ["app", "hog"]
    app = s["vms"][0]
    assert app["workloads"][0]["kind"] == "program"
    assert app["workloads"][0]["completed"] > 0
    assert app["spin_time_s"] > 0, "four threads on one lock should spin somewhat"
    assert len(app["vcpus"]) == 4
    assert s["event_counts"]["ipis_sent"] > 0
    assert s["event_counts"]["lock_acquisitions"] > 0
    assert s["host"]["pcpus"] == 8


def test_run_check_invariants(program_toml: Path):
    plain = run_cli("run", str(program_toml), "--json")
    checked = run_cli("run", str(program_toml), "--json", "--check-invariants")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == plain.stdout, "checking invariants must not change the result"


def test_run_out_writes_files(program_toml: Path, tmp_path: Path):
    out = tmp_path / "results" / "nested"
    p = run_cli("run", str(program_toml), "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr
    # --json still prints only the JSON on stdout
    summary = json.loads(p.stdout)
    assert json.loads((out / "summary.json").read_text()) == summary
    with open(out / "vms.csv", newline="") as f:
        vms = list(csv.DictReader(f))
    assert [r["name"] for r in vms] == ["app", "hog"]
    assert {"cpu_time_s", "cpu_share", "wait_time_s", "throughput", "latency_p99_ms"} <= set(vms[0])
    with open(out / "vcpus.csv", newline="") as f:
        vcpus = list(csv.DictReader(f))
    assert len(vcpus) == 8
    assert {"vm", "index", "dispatches", "migrations_total", "migrations_other_numa"} <= set(vcpus[0])
    assert (out / "workloads.csv").exists()
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert not (out / "vms.parquet").exists()
    else:
        import pandas as pd

        df = pd.read_parquet(out / "vcpus.parquet")
        assert len(df) == 8
    # no temporary files are left behind
    assert not [f for f in out.iterdir() if f.name.startswith(".")]


def test_run_out_replaces_existing_files(program_toml: Path, tmp_path: Path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "summary.json").write_text("stale")
    p = run_cli("run", str(program_toml), "--out", str(out), "--seed", "3")
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "summary.json").read_text())["seed"] == 3


def test_run_out_unwritable_is_an_error(program_toml: Path, tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = run_cli("run", str(program_toml), "--out", str(blocker / "sub"))
    assert p.returncode == 2
    assert p.stderr.startswith("vcpulab: error:")
    assert_no_traceback(p)


def test_a_write_error_names_the_users_path_not_a_temporary_file(program_toml: Path, tmp_path: Path):
    # A missing folder is created (issue 30, defect 4); a file where the folder should be
    # is an error that names the trace file.
    (tmp_path / "not-a-dir").write_text("x")
    target = tmp_path / "not-a-dir" / "t.json"
    for args in (["run", str(program_toml), "--trace", str(target)],
                 ["trace", str(program_toml), "--out", str(target)]):
        p = run_cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.strip() == f"vcpulab: error: {target}: Not a directory", p.stderr
    # A failure after the temporary file was written (here: the target is a folder).
    (tmp_path / "o" / "summary.json").mkdir(parents=True)
    p = run_cli("run", str(program_toml), "--out", str(tmp_path / "o"))
    assert p.returncode == 2
    assert p.stderr.strip().startswith(f"vcpulab: error: {tmp_path / 'o' / 'summary.json'}: "), p.stderr
    assert not [f for f in os.listdir(tmp_path / "o") if f.endswith(".tmp")]


# ---------------------------------------------------------------------- determinism


def test_same_input_gives_identical_bytes(program_toml: Path):
    a = run_cli("run", str(program_toml), "--json")
    b = run_cli("run", str(program_toml), "--json")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_seed_changes_the_result(program_toml: Path):
    base = run_cli("run", str(program_toml), "--json").stdout
    s1 = run_cli("run", str(program_toml), "--json", "--seed", "1").stdout
    s1_again = run_cli("run", str(program_toml), "--json", "--seed", "1").stdout
    assert json.loads(s1)["seed"] == 1
    assert s1 == s1_again
    assert s1 != base
    strip = lambda t: {k: v for k, v in json.loads(t).items() if k != "seed"}  # noqa: E731
    assert strip(s1) != strip(base), "a different seed should change more than the seed field"


def test_bad_seed_is_a_usage_error(program_toml: Path):
    p = run_cli("run", str(program_toml), "--seed", "-1")
    assert p.returncode == 2
    assert "seed" in p.stderr
    assert_no_traceback(p)


LONG_IDLE = """\
name = "year-of-1ns-slices"
duration = "8760h"
[host]
cores_per_socket = 2
[scheduler]
name = "rr"
slice = "1ns"
[[vm]]
name = "idle"
vcpus = 2
"""


def test_days_long_run_is_refused_up_front_with_force_override(tmp_path: Path):
    f = tmp_path / "long.toml"
    f.write_text(LONG_IDLE)
    p = run_cli("run", str(f))
    assert p.returncode == 2
    assert "--force" in p.stderr and "estimated" in p.stderr and "scheduler" in p.stderr, p.stderr
    assert_no_traceback(p)
    # Idle pCPUs take no slices, so the forced run is quick.
    p = run_cli("run", str(f), "--force", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["scenario"] == "year-of-1ns-slices"


def test_trace_honours_force_and_check_invariants(tmp_path: Path):
    # `run --trace` used to run without the two flags: a forced run was refused with a
    # message asking for --force.
    f = tmp_path / "long.toml"
    f.write_text(LONG_IDLE)
    trace_file = tmp_path / "long.json"
    p = run_cli("run", str(f), "--trace", str(trace_file))
    assert p.returncode == 2 and "--force" in p.stderr, p.stderr
    p = run_cli("run", str(f), "--trace", str(trace_file), "--force", "--check-invariants", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["scenario"] == "year-of-1ns-slices"
    assert json.loads(trace_file.read_text())
    import vcpulab

    assert vcpulab.trace(_toml_dict(LONG_IDLE), force=True, check_invariants=True).result.summary


def test_api_run_force():
    import vcpulab

    with pytest.raises(vcpulab.ScenarioError, match="force=True"):
        vcpulab.run(_toml_dict(LONG_IDLE))
    assert vcpulab.run(_toml_dict(LONG_IDLE), force=True).summary


def test_validate_gives_runs_verdict_on_a_days_long_run(tmp_path: Path):
    f = tmp_path / "long.toml"
    f.write_text(LONG_IDLE)
    p = run_cli("validate", str(f))
    assert p.returncode == 2, p.stdout
    assert "estimated" in p.stderr and "--force" in p.stderr, p.stderr
    assert_no_traceback(p)
    p = run_cli("validate", str(f), "--force")
    assert p.returncode == 0 and p.stdout.startswith("OK"), p.stderr
    import vcpulab

    with pytest.raises(vcpulab.ScenarioError, match="estimated"):
        vcpulab.validate(_toml_dict(LONG_IDLE))
    assert vcpulab.validate(_toml_dict(LONG_IDLE), force=True)["estimated_events"] > 5e10


def _toml_dict(text: str) -> dict:
    assert text == LONG_IDLE
    return {
        "name": "year-of-1ns-slices",
        "duration": "8760h",
        "host": {"cores_per_socket": 2},
        "scheduler": {"name": "rr", "slice": "1ns"},
        "vm": [{"name": "idle", "vcpus": 2}],
    }


# ------------------------------------------------------------------------- validate


def test_validate_ok(program_toml: Path):
    p = run_cli("validate", str(program_toml))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("OK")
    assert "program-mix" in p.stdout and "rr" in p.stdout and "8 pCPUs" in p.stdout


def _with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


BAD_SCENARIOS = {
    # id: (edit of the program scenario, key path, words that say what is wrong)
    "unknown-key": (lambda t: _with(t, 'weight = 512\n', 'weight = 512\nweigth = 3\n'),
                    "vm[0].weigth", ["unknown key", "weight"]),
    "negative-duration": (lambda t: _with(t, 'duration = "500ms"', 'duration = "-2s"'),
                          "duration", ["negative"]),
    "affinity-missing-cpu": (lambda t: _with(t, 'affinity = "0-3"', 'affinity = "0-9"'),
                             "vm[1].affinity", ["9", "0-7"]),
    "zero-vcpus": (lambda t: _with(t, 'vcpus = 4\nweight', 'vcpus = 0\nweight'),
                   "vm[0].vcpus", ["0", "1"]),
    "unknown-op": (lambda t: _with(t, 'op = "sleep"', 'op = "nap"'),
                   "vm[0].workload[0].ops[4].op", ["unknown op", "sleep"]),
    "unknown-scheduler-param": (lambda t: _with(t, 'name = "rr"', 'name = "rr"\nslise = "1ms"'),
                                "scheduler.slise", ["slice"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_validate_errors_name_file_key_and_problem(case: str, tmp_path: Path):
    edit, key, words = BAD_SCENARIOS[case]
    path = tmp_path / f"{case}.toml"
    path.write_text(edit(PROGRAM_SCENARIO))
    for cmd in ("validate", "run"):
        p = run_cli(cmd, str(path))
        assert p.returncode == 2, (cmd, p.stdout, p.stderr)
        assert p.stdout == ""
        assert_no_traceback(p)
        msg = p.stderr.strip()
        assert msg.startswith(f"vcpulab: error: {path}: {key}: "), msg
        for w in words:
            assert w in msg.split(f"{key}: ", 1)[1], f"{w!r} not in {msg!r}"


def test_a_misspelt_required_key_is_named_as_the_typo(tmp_path: Path):
    path = tmp_path / "typo.toml"
    path.write_text(_with(PROGRAM_SCENARIO, "cores_per_socket", "cores_per_sockt"))
    p = run_cli("validate", str(path))
    assert p.returncode == 2
    assert p.stderr.startswith(
        f'vcpulab: error: {path}: host.cores_per_sockt: unknown key (did you mean "cores_per_socket"?'
    ), p.stderr


def test_a_file_that_is_not_utf8_is_a_scenario_error(tmp_path: Path):
    path = tmp_path / "bin.toml"
    path.write_bytes(b'name = "x"\n\xff\xfe\n')
    for cmd in ("validate", "run"):
        p = run_cli(cmd, str(path))
        assert p.returncode == 2, (cmd, p.stderr)
        assert p.stderr.startswith(f"vcpulab: error: {path}: not UTF-8 text (byte 0xff at offset 11)"), p.stderr
        assert_no_traceback(p)


def test_validate_syntax_error_names_file(tmp_path: Path):
    path = tmp_path / "broken.toml"
    path.write_text('name = "x\nduration = 1s\n')
    p = run_cli("validate", str(path))
    assert p.returncode == 2
    assert p.stderr.startswith(f"vcpulab: error: {path}:")
    assert_no_traceback(p)


def test_missing_file(tmp_path: Path):
    path = tmp_path / "nope.toml"
    for cmd in ("validate", "run"):
        p = run_cli(cmd, str(path))
        assert p.returncode == 2
        assert p.stderr.strip() == f"vcpulab: error: {path}: No such file or directory"


@pytest.mark.skipif(os.name != "posix", reason="file names are bytes on POSIX only")
def test_a_file_name_that_is_not_utf8(tmp_path: Path):
    """Its undecodable bytes reach Python as lone surrogates: no traceback, and an error
    names the file as Python shows such a name (a reading of the file once crashed)."""
    name = tmp_path / b"m\xff.toml".decode("utf-8", "surrogateescape")
    p = run_cli("validate", str(name))
    assert p.returncode == 2, p.stderr
    assert p.stderr == f"vcpulab: error: {tmp_path}/m\\udcff.toml: No such file or directory\n"
    name.write_text(PROGRAM_SCENARIO)
    for args in (["validate", str(name)], ["run", str(name), "--json"]):
        # Bytes: `validate` prints the name's bytes as they are.
        p = run_command([VCPULAB, *args], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, (args, p.stderr)
        assert b"Traceback" not in p.stderr


def test_json_scenario_file(tmp_path: Path, program: dict):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(program))
    toml_path = tmp_path / "s.toml"
    toml_path.write_text(PROGRAM_SCENARIO)
    a = run_cli("run", str(path), "--json")
    b = run_cli("run", str(toml_path), "--json")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout


# ----------------------------------------------------------------------- schedulers


def test_schedulers_json():
    p = run_cli("schedulers", "--json")
    assert p.returncode == 0, p.stderr
    scheds = json.loads(p.stdout)
    names = [s["name"] for s in scheds]
    assert "rr" in names and "hyperv-root" in names
    for s in scheds:
        assert s["description"]
        for prm in s["params"]:
            assert {"name", "type", "default", "help"} <= set(prm)


def test_schedulers_table():
    p = run_cli("schedulers")
    assert p.returncode == 0, p.stderr
    assert "rr" in p.stdout and "hyperv-root" in p.stdout
    assert "slice" in p.stdout and "quantum" in p.stdout


def test_workloads_lists_every_preset_in_table_and_json():
    p = run_cli("workloads", "--json")
    assert p.returncode == 0, p.stderr
    kinds = {k["name"]: k["description"] for k in json.loads(p.stdout)}
    assert {"program", "sysbench-cpu", "lookbusy", "ping", "netperf", "webbench", "netback", "timer-rt"} <= set(kinds)
    assert all(kinds.values())
    table = run_cli("workloads")
    assert table.returncode == 0, table.stderr
    for name in kinds:
        assert name in table.stdout
    assert kinds == {k["name"]: k["description"] for k in vcpulab.workload_kinds()}


# ------------------------------------------------------------------------ reproduce


def test_reproduce_hyperv_root_json():
    p = run_cli("reproduce", "hyperv-root", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)  # nothing but JSON on stdout
    assert len(rows) == 9
    for r in rows:
        assert set(r) == ROW_KEYS
        assert r["experiment"] == "hyperv-root"
        assert r["unit"] == "events/s"
        assert isinstance(r["paper"], float) and isinstance(r["sim"], float)
    assert len({r["case"] for r in rows}) == 9
    assert "\r" not in p.stderr, "no progress bar without a TTY"


def test_reproduce_tables():
    p = run_cli("reproduce", "hyperv-root", "--no-progress")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "hyperv-root" in out
    assert "sysbench_events_per_s (events/s)" in out
    header = next(line for line in out.splitlines() if line.startswith("case"))
    assert header.split()[:7] == ["case", "paper", "vcpulab", "95%", "CI", "seeds", "ratio"]
    assert "vm2-4busy/4vp-4t" in out
    assert "notes:" in out


def test_reproduce_list():
    p = run_cli("reproduce", "--list")
    assert p.returncode == 0, p.stderr
    assert "hyperv-root" in p.stdout and "vm1-alone/1vp-1t" in p.stdout
    j = run_cli("reproduce", "--list", "--json")
    exps = json.loads(j.stdout)
    assert exps[0]["id"] == "hyperv-root" and len(exps[0]["cases"]) == 9


def test_reproduce_seed_is_passed_on():
    a = json.loads(run_cli("reproduce", "hyperv-root", "--json", "--seed", "5").stdout)
    b = json.loads(run_cli("reproduce", "hyperv-root", "--json", "--seed", "5").stdout)
    assert a == b


def test_reproduce_unknown_name():
    p = run_cli("reproduce", "no-such-experiment")
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.startswith('vcpulab: error: unknown experiment "no-such-experiment"')
    assert "hyperv-root" in p.stderr
    assert_no_traceback(p)


def test_reproduce_metric_without_scenario_is_a_usage_error(tmp_path: Path):
    for extra in ([], ["--out", str(tmp_path / "o")]):
        p = run_cli("reproduce", "hyperv-root", "--metric", "x", *extra)
        assert p.returncode == 2 and p.stdout == "", extra
        assert "--metric" in p.stderr and "--scenario" in p.stderr, p.stderr
        assert_no_traceback(p)
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------- error mapping (in-process)


@pytest.mark.parametrize(
    "exc, status",
    [
        (lambda: __import__("vcpulab").SimulationError('simulation of scenario "x" (seed 1) failed at t=5ns: boom'), 1),
        (lambda: __import__("vcpulab").ScenarioError("f.toml: vm[0].vcpus: bad"), 2),
        (lambda: __import__("vcpulab").NotFoundError("unknown experiment"), 2),
        (lambda: PermissionError(13, "Permission denied", "f.toml"), 2),
    ],
)
def test_errors_map_to_exit_status(monkeypatch, capsys, program_toml: Path, exc, status):
    from vcpulab import api, cli

    def boom(*a, **k):
        raise exc()

    monkeypatch.setattr(api, "run", boom)
    assert cli.main(["run", str(program_toml)]) == status
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("vcpulab: error: ")
    assert "Traceback" not in captured.err


def test_progress_bar_is_quiet_for_fast_runs(capsys):
    """progress=True shows a bar only after two seconds; a fast run prints nothing."""
    import vcpulab

    rows = vcpulab.reproduce(["hyperv-root"], progress=True)
    assert len(rows) == 9
    assert capsys.readouterr().err == ""


def test_reproduce_with_a_tty_on_stderr_prints_only_tables():
    import os
    import pty
    import subprocess

    from conftest import VCPULAB, run_command

    master, slave = pty.openpty()
    try:
        p = run_command([VCPULAB, "reproduce", "hyperv-root"], stdout=subprocess.PIPE, stderr=slave,
                        stdin=subprocess.DEVNULL, text=True, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 0
    assert "vm2-4busy/4vp-4t" in p.stdout


def test_simulation_error_exits_1(tmp_path: Path):
    """A valid scenario whose loop takes no time cannot make progress: exit 1, one line."""
    path = tmp_path / "zero.toml"
    path.write_text(
        'name = "zero-work"\nduration = "10ms"\n[host]\ncores_per_socket = 1\n[scheduler]\nname = "rr"\n'
        '[[vm]]\nname = "a"\nvcpus = 1\n[[vm.workload]]\nkind = "program"\n'
        'ops = [ { op = "compute", duration = "0us" } ]\n'
    )
    p = run_cli("run", str(path))
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stdout == ""
    assert p.stderr.startswith('vcpulab: error: simulation of scenario "zero-work" (seed 1) failed')
    assert len(p.stderr.strip().splitlines()) == 1
    assert_no_traceback(p)


def test_validate_rejects_ipi_target_beyond_vcpus(tmp_path: Path):
    path = tmp_path / "ipi.toml"
    path.write_text(PROGRAM_SCENARIO.replace('{ op = "ipi", targets = "all" }', '{ op = "ipi", targets = [9] }'))
    p = run_cli("validate", str(path))
    assert p.returncode == 2
    assert f"{path}: vm[0].workload[0].ops[2].targets" in p.stderr


def test_reproduce_software_ft_json_and_host_thread_frame(tmp_path):
    p = run_cli("reproduce", "software-ft", "--json", "--no-adaptive")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    worst = {r["case"]: r for r in rows if r["metric"] == "max_response_ms"}
    assert len(worst) == 25 and all(isinstance(r["paper"], float) for r in worst.values())
    assert worst["p4/io-evalvm"]["sim"] <= worst["p1/io-evalvm"]["sim"]
    # A scenario with host threads: the Python frame has one row per host thread.
    import vcpulab

    text = (REPO / "scenarios/reproductions/software-ft/scenario.toml").read_text()
    assert 'duration = "101s"' in text
    text = text.replace('duration = "101s"', 'duration = "7s"')
    f = tmp_path / "ft.toml"
    f.write_text(text)
    res = vcpulab.run(str(f))
    ht = res.host_threads()
    # Kemari and DRBD, then the host's housekeeping threads (the default noise of a Linux host).
    names = list(ht["name"])
    assert names[:2] == ["kemari", "drbd"] and list(ht["helper"])[:2] == ["kemari", "drbd"]
    assert names[2:] == [f"kthread-{c}" for c in range(len(names) - 2)] and len(names) > 2
    assert int(ht["jobs"][0]) == res.vms()["ft_syncs"][0] >= 1


def test_reproduce_scenario_prints_a_case_that_runs_like_the_case(tmp_path):
    p = run_cli("reproduce", "flms-balance", "--scenario", "credit/numa", "--metric", "sysbench_prime_s")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("# vcpulab reproduce flms-balance: case credit/numa (metric sysbench_prime_s)")
    f = tmp_path / "case.toml"
    f.write_text(p.stdout)
    summary = vcpulab.run(str(f)).summary
    assert summary["vms"][0]["workloads"][0]["kind"] == "sysbench-cpu"
    (row,) = [r for r in vcpulab.reproduce(["flms-balance"]) if r["case"] == "credit/numa" and r["metric"] == "sysbench_prime_s"]
    # The experiment averages three seeds from the scenario's; seed 1 alone is near it.
    assert abs(summary["vms"][0]["workloads"][0]["completion_s"] / row["sim"] - 1) < 0.05
    bad = run_cli("reproduce", "flms-io", "--scenario", "nope")
    assert bad.returncode == 2 and "cases: credit" in bad.stderr
    assert_no_traceback(bad)
