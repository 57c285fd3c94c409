//! `cargo run --release --example repro -- EXPERIMENT [SEED]`: prints the rows as TSV.
//! (The user-facing command is `vcpulab reproduce`; this is for developing models.)
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let e = vcpulab_core::repro::find(&args[1]).unwrap_or_else(|e| panic!("{e}"));
    let seed = args.get(2).map(|s| s.parse().unwrap());
    for r in vcpulab_core::repro::run_experiment(&e, seed).unwrap_or_else(|e| panic!("{e}")) {
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
        println!("{}\t{}\t{}\t{}", r.case, r.metric, f(r.paper), f(r.sim));
    }
}
