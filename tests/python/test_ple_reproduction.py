"""The PLE reproductions' expected directions (issue: "which must come out of the
mechanisms, not out of tuning"), checked on the built-in experiment as users run it."""

import pytest

import vcpulab


@pytest.fixture(scope="module")
def kvm_ple():
    rows = vcpulab.reproduce(["kvm-ple"])
    return {(r["case"], r["metric"]): r["sim"] for r in rows}


def test_ebizzy_gains_a_lot_from_a_plus_b_and_little_from_b_alone(kvm_ple):
    assert kvm_ple[("ebizzy/ab", "perf_norm")] >= 1.5
    assert 0.85 <= kvm_ple[("ebizzy/b", "perf_norm")] <= 1.15


def test_hackbench_gains_with_b(kvm_ple):
    # The paper's other half, "hackbench loses a little with (a)", does not come out:
    # since the fair class's tick stays on its grid (tick_grid, 2026-11-27) hackbench
    # gained ~11% with (a) at the default seeds, and `vcpulab reproduce` of 2026-12-05 gives
    # 1.007, within its interval of no change. That is a finding, reported by the claims
    # `hackbench-a-loses-little-high` and `hackbench-a-hurts` (undecided there; they failed
    # at ~11%; docs/models.md), not an expectation to hold the model to here.
    assert kvm_ple[("hackbench/b", "perf_norm")] >= 1.03


def test_ipi_heavy_workloads_ple_less_with_a(kvm_ple):
    for bench in ["ebizzy", "pbzip2"]:
        assert kvm_ple[(f"{bench}/a", "ple_norm")] < 1.0, bench


def test_spinlock_heavy_workloads_ple_less_with_b(kvm_ple):
    for bench in ["hackbench", "dbench"]:
        assert kvm_ple[(f"{bench}/b", "ple_norm")] < 1.0, bench


def test_baseline_dbench_shows_long_streaks(kvm_ple):
    assert kvm_ple[("dbench/baseline", "streak_median")] >= 10
    assert kvm_ple[("dbench/baseline", "streak_max")] >= 100


def test_every_row_has_the_contract_keys(kvm_ple):
    rows = vcpulab.reproduce(["hyperv-root"])
    for r in rows:
        assert set(r) >= {"experiment", "case", "metric", "unit", "paper", "sim"}
    assert len(kvm_ple) == 5 * 4 * 5  # benchmarks x variants x metrics


@pytest.fixture(scope="module")
def kvm_ple_short():
    rows = vcpulab.reproduce(["kvm-ple-short"])
    return {(r["case"], r["metric"]): r["sim"] for r in rows}


def test_short_paper_raytrace_gains_under_3_percent_and_vips_the_most(kvm_ple_short):
    gains = {
        case.split("/")[0]: v
        for (case, metric), v in kvm_ple_short.items()
        if case.endswith("/ab") and metric == "perf_norm"
    }
    assert set(gains) == {"ebizzy", "hackbench", "dbench", "pbzip2", "swaptions", "raytrace", "vips"}
    assert gains["raytrace"] - 1 < 0.03
    assert max(gains, key=gains.get) == "vips", gains
