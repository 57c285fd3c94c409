"""The FLMS reproductions (issue 4) as users run them: the expected relations that come
out of the mechanisms (the ones that do not are listed in docs/models.md and are not
asserted here), and the literal pool rule's fixed point."""

import pytest

import vcpulab


def _rows(exp):
    return {(r["case"], r["metric"]): r["sim"] for r in vcpulab.reproduce([exp])}


@pytest.fixture(scope="module")
def io():
    return _rows("flms-io")


def test_every_case_and_metric_of_table_1_is_reported(io):
    for case in ["credit", "flms", "io-bound", "kvm", "vturbo"]:
        for metric in ["latency_ms", "bandwidth_mbps"]:
            assert io[(case, metric)] is not None and io[(case, metric)] > 0, (case, metric)
    papers = {r["case"]: r["paper"] for r in vcpulab.reproduce(["flms-io"]) if r["metric"] == "latency_ms"}
    assert papers["credit"] == 16.853 and papers["flms"] == 3.939 and papers["vslicer"] is None


def test_latency_order_is_credit_vturbo_kvm_and_io_bound_flms(io):
    # The issue's order, over the paravirtual path through dom0 (Table 1's setting),
    # without its narrowest link: KVM and I/O bounding tie within seed noise (8.2 and
    # 8.3 ms on ten seeds, per-seed ranges 7.2..9.2 and 6.9..9.6; the paper has 5.3
    # against 4.8), so which is above is not asserted (docs/models.md says so).
    lat = {c: io[(c, "latency_ms")] for c in ["credit", "vturbo", "kvm", "io-bound", "flms"]}
    middle = [lat["kvm"], lat["io-bound"]]
    assert lat["credit"] > lat["vturbo"] > max(middle), lat
    assert min(middle) > lat["flms"], lat
    assert io[("credit", "latency_ms")] > io[("vslicer", "latency_ms")]


def test_flms_cuts_latency_to_at_most_0_4_of_credit(io):
    assert io[("flms", "latency_ms")] <= 0.4 * io[("credit", "latency_ms")]
    # Also over SR-IOV, where only the guests' own scheduling is left.
    assert io[("flms-direct", "latency_ms")] <= 0.4 * io[("credit-direct", "latency_ms")]


def test_flms_has_the_highest_bandwidth_and_at_least_1_2_of_credit(io):
    bw = {c: io[(c, "bandwidth_mbps")] for c in ["credit", "flms", "io-bound", "kvm", "vturbo"]}
    assert max(bw, key=bw.get) == "flms", bw
    assert bw["flms"] >= 1.2 * bw["credit"]
    # Also once lookbusy's controller has grown its busy phases (10 s warm-up).
    assert io[("flms-warm", "bandwidth_mbps")] >= 1.2 * io[("credit-warm", "bandwidth_mbps")]
    assert io[("flms-warm", "latency_ms")] <= 0.4 * io[("credit-warm", "latency_ms")]


def test_dom0_is_what_sr_iov_saves(io):
    # Without dom0 on the path, a ping waits only for vm1's own vCPU: vTurbo's I/O vCPU
    # then answers from the turbo core at once.
    assert io[("vturbo-direct", "latency_ms")] < 0.2 * io[("vturbo", "latency_ms")]
    assert io[("flms-direct", "latency_ms")] < io[("flms", "latency_ms")]


def test_pools_sized_from_run_time_are_less_fair_than_from_demand():
    # The literal eq. 1-4 rule (run time) can stick at one short-slice pCPU: in the
    # fairness run it misses the 0.95 where the demand reading keeps it.
    fair = _rows("flms-fairness")
    assert fair[("flms-run", "jain_vm")] < 0.95 <= fair[("flms", "jain_vm")]


def test_flms_keeps_vms_fair():
    fair = _rows("flms-fairness")
    assert fair[("flms", "jain_vm")] >= 0.95
    assert fair[("credit", "jain_vm")] >= 0.95


def test_flms_migrates_less_and_rarely_across_sockets():
    bal = _rows("flms-balance")
    for host in ["non-numa", "numa"]:
        assert bal[(f"credit/{host}", "cross_socket_share")] >= 3 * bal[(f"flms/{host}", "cross_socket_share")], host
        assert bal[(f"flms/{host}", "migrations")] < bal[(f"credit/{host}", "migrations")], host
        assert bal[(f"flms/{host}", "sysbench_prime_s")] > 0


def test_flms_nlsvm_sysbench_is_faster_beside_all_three_classes():
    comp = _rows("flms-compute")
    assert comp[("flms/mixed", "completion_s")] <= 0.95 * comp[("credit/mixed", "completion_s")]


def test_flms_iozone_reads_are_no_slower_than_credit():
    ioz = _rows("flms-iozone")
    for rec in ["1M", "2M", "4M", "8M"]:
        assert ioz[(f"flms/read-{rec}", "throughput_kbps")] >= ioz[(f"credit/read-{rec}", "throughput_kbps")], rec
        assert ioz[(f"credit/write-{rec}", "throughput_kbps")] > 0


def test_flms_web_server_is_reported_and_the_literal_rule_starves_it():
    # The paper's +10% does not hold (models.md); the literal rule halves the server.
    web = _rows("flms-webbench")
    assert web[("flms", "bandwidth_mbps")] > 0
    assert web[("flms-run", "bandwidth_mbps")] < 0.6 * web[("credit", "bandwidth_mbps")]
