//! `cargo run --release --example run -- SCENARIO [SEED]`: prints the summary JSON.
//! (The user-facing CLI is `vcpulab run`; this is for developing the core.)
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: run SCENARIO [SEED]");
        std::process::exit(2);
    };
    let seed = args.get(2).map(|s| s.parse().expect("seed is an integer"));
    match vcpulab_core::api::run_file(path, seed, &Default::default()) {
        Ok(s) => println!("{}", vcpulab_core::api::summary_json(&s)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
