//! Built-in reproductions: each case's simulated figure against the paper's.

use vcpulab_core::repro;

/// The acceptance criterion for hyperv-root: every case within 5% of the blog.
#[test]
fn hyperv_root_all_nine_cases_within_five_percent() {
    let e = repro::find("hyperv-root").unwrap();
    assert_eq!(e.cases.len(), 9);
    let mut report = String::new();
    let mut worst: f64 = 0.0;
    for c in &e.cases {
        let rows = repro::finish_rows(&e, &repro::run_case(&e, &c.id, None).unwrap());
        let (sim, paper) = (rows[0].sim.unwrap(), rows[0].paper.unwrap());
        let err = (sim / paper - 1.0).abs();
        worst = worst.max(err);
        report += &format!(
            "{:<20} paper {:>8.2} sim {:>8.2} ({:+.1}%)\n",
            c.id,
            paper,
            sim,
            (sim / paper - 1.0) * 100.0
        );
    }
    println!("{report}");
    assert!(worst <= 0.05, "a case is more than 5% off:\n{report}");
}

/// Issue 28's setting for the seed authors' 5.6 patches: four 8-vCPU VMs on the kvm-ple
/// experiment's host, every case running the same benchmark in all four VMs.
#[test]
fn kvm_ple_artifact_runs_four_8_vcpu_vms_on_the_kvm_ple_host() {
    use vcpulab_core::Scenario;
    let e = repro::find("kvm-ple-artifact").unwrap();
    let ple = repro::find("kvm-ple").unwrap();
    let host = |text: &str, id: &str| {
        let sc = Scenario::from_toml_str(text, id).unwrap();
        (sc.host.ncpus(), sc.host.base_ghz)
    };
    assert_eq!(
        host(&e.scenario_text, &e.id),
        host(&ple.scenario_text, &ple.id)
    );
    for case in &e.cases {
        let sc = repro::case_scenario(&e, case).unwrap();
        let vcpus: Vec<u32> = sc.vms.iter().map(|v| v.vcpus).collect();
        assert_eq!(vcpus, [8, 8, 8, 8], "{}", case.id);
        let bench = &case.axes[0].1;
        for vm in &sc.vms {
            assert_eq!(&vm.workloads[0].kind, bench, "{}", case.id);
        }
    }
}
