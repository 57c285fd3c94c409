//! `cargo run --release --example repro -- EXPERIMENT [SEED] [WORKERS]`: prints the rows
//! as TSV (case, metric, paper, sim, interval, seeds, regimes), then each claim's verdict.
//! (The user-facing command is `vcpulab reproduce`; this is for developing models.)
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let e = vcpulab_core::repro::find(&args[1]).unwrap_or_else(|e| panic!("{e}"));
    let seed = args.get(2).map(|s| s.parse().unwrap());
    let workers = args.get(3).map_or(1, |s| s.parse().unwrap());
    let opts = vcpulab_core::api::RunOptions::default();
    let r = vcpulab_core::repro::reproduce(&e, seed, workers, true, &opts, &|_, _| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
    for r in r.rows {
        println!(
            "{}\t{}\t{}\t{}\t[{}, {}]\t{}\t{}",
            r.case,
            r.metric,
            f(r.paper),
            f(r.sim),
            f(r.ci_low),
            f(r.ci_high),
            r.seeds,
            r.regimes.map(|g| g.text).unwrap_or_default()
        );
    }
    for c in r.claims {
        println!("{}\t{}\t{}", c.verdict, c.claim, c.detail);
    }
}
