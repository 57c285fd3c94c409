//! `cargo run --release --example run -- SCENARIO [SEED]`: prints the summary JSON.
//! (The user-facing CLI is `vcpulab run`; this is for developing the core.) With
//! `VCPULAB_CHECK` set, the engine checks its invariants after every event.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: run SCENARIO [SEED]");
        std::process::exit(2);
    };
    let seed = args.get(2).map(|s| s.parse().expect("seed is an integer"));
    let opts = vcpulab_core::engine::RunOptions {
        check_invariants: std::env::var_os("VCPULAB_CHECK").is_some(),
        ..Default::default()
    };
    match vcpulab_core::api::run_file(path, seed, &opts) {
        Ok(s) => println!("{}", vcpulab_core::api::summary_json(&s)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
