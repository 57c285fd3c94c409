//! `cargo run -p vcpulab-kvm --example kvm_run < config.json`: one harness run, result JSON on stdout.
use std::io::Read;
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    match vcpulab_kvm::run_json(&s) {
        Ok(r) => println!("{r}"),
        Err(e) => {
            println!("{e}");
            std::process::exit(1)
        }
    }
}
