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
