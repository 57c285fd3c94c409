//! Issue 30, "Defects, verbatim": 2 (Rust Debug text in a host-thread message), 3 (KVM
//! versions the message does not allow) and 8 (a `vcpulab kvm run` file given to
//! `vcpulab run`). Defect 5 (the size limit's message) is tested in limits.rs.

use std::path::PathBuf;
use vcpulab_core::Scenario;

fn err(text: &str) -> String {
    match Scenario::from_toml_str(text, "d.toml") {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const HEAD: &str = r#"
duration = "1s"
[host]
cores_per_socket = 2
[scheduler]
name = "rr"
[[vm]]
name = "a"
vcpus = 2
[[vm.workload]]
kind = "stress-ng"
"#;

fn no_debug_text(msg: &str) {
    for bad in [
        "Lock {",
        "Fixed(",
        "Ticket",
        "Kernel",
        "Ipi {",
        "WaitRequest",
        " }",
    ] {
        assert!(!msg.contains(bad), "Rust Debug text {bad:?} in: {msg}");
    }
}

// Defect 2 -------------------------------------------------------------------------------

#[test]
fn d2_a_lock_op_in_a_host_thread_is_named_as_written_at_its_key_path() {
    let msg = err(&format!(
        r#"{HEAD}
[[host_thread]]
name = "h"
workload = {{ kind = "program", ops = [{{ op = "compute", duration = "1us" }}, {{ op = "lock", lock = "l", hold = "1us" }}] }}
"#
    ));
    no_debug_text(&msg);
    assert!(
        msg.starts_with("d.toml: host_thread[0].workload.ops[1]: op = \"lock\" needs a guest; host threads run compute, sleep, io and netback operations only"),
        "{msg}"
    );
}

#[test]
fn d2_a_serve_op_in_a_host_thread_is_named_as_written() {
    let msg = err(&format!(
        r#"{HEAD}
[[host_thread]]
name = "h"
workload = {{ kind = "program", arrivals = {{ process = "poisson", rate = 10 }}, ops = [{{ op = "serve", service = "1us" }}] }}
"#
    ));
    no_debug_text(&msg);
    assert!(
        msg.contains("host_thread[0].workload.ops[0]: op = \"serve\" needs a guest"),
        "{msg}"
    );
}

#[test]
fn d2_a_guest_preset_in_a_host_thread_is_named_by_its_kind() {
    let msg = err(&format!(
        r#"{HEAD}
[[host_thread]]
name = "h"
workload = {{ kind = "dbench" }}
"#
    ));
    no_debug_text(&msg);
    assert!(
        msg.contains("host_thread[0].workload.kind: the \"dbench\" workload runs"),
        "{msg}"
    );
    assert!(msg.contains("which need a guest"), "{msg}");
}

// Defect 3 -------------------------------------------------------------------------------

fn with_version(v: &str) -> Result<Scenario, String> {
    let text = format!("{HEAD}\n[kvm]\nversion = \"{v}\"\n");
    Scenario::from_toml_str(&text, "d.toml").map_err(|e| e.to_string())
}

#[test]
fn d3_kvm_versions_outside_the_messages_allowed_set_are_refused() {
    for bad in [
        "6-banana", "6", "5", "5.2", "5.0", "4.14", "4.19", "7.0", "6.", "6.x", "6.6.1", "5.3rc",
        " 6.6", "6.06", "",
    ] {
        let msg = with_version(bad).expect_err(bad);
        assert!(
            msg.contains("kvm.version: unknown KVM version")
                && msg.contains("allowed: \"4.15\" (the papers' host), or \"5.3\" .. \"6.x\""),
            "{bad:?}: {msg}"
        );
    }
}

#[test]
fn d3_kvm_versions_the_message_allows_are_accepted() {
    // 4.15 and 6.6 are the versions shipped scenarios, benches and tests use.
    for good in [
        "4.15", "5.3", "5.4", "5.10", "5.15", "5.19", "6.0", "6.1", "6.6", "6.12",
    ] {
        with_version(good).unwrap_or_else(|e| panic!("{good:?}: {e}"));
    }
}

// Defect 8 -------------------------------------------------------------------------------

const HINT: &str = "this looks like a real-KVM harness file: run it with `vcpulab kvm run";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn d8_every_kvm_harness_file_gets_the_kvm_run_hint() {
    let dir = repo_root().join("scenarios/kvm");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        n += 1;
        let origin = format!(
            "scenarios/kvm/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let msg = Scenario::from_toml_str(&text, &origin)
            .map(|_| ())
            .expect_err(&origin)
            .to_string();
        assert!(
            msg.contains(&format!("; {HINT} {origin}`")),
            "{origin}: {msg}"
        );
    }
    assert!(n >= 6, "only {n} files in {}", dir.display());
}

#[test]
fn d8_ticket_4_says_what_is_missing_and_where_to_run_it() {
    let path = repo_root().join("scenarios/kvm/ticket-4.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let msg = Scenario::from_toml_str(&text, "scenarios/kvm/ticket-4.toml")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert_eq!(
        msg,
        "scenarios/kvm/ticket-4.toml: host: is required but missing; this looks like a real-KVM \
         harness file: run it with `vcpulab kvm run scenarios/kvm/ticket-4.toml`"
    );
}

#[test]
fn d8_ordinary_scenario_errors_get_no_hint() {
    for text in [
        // a misspelt key
        HEAD.replace("cores_per_socket", "cores_per_sockt"),
        // a missing scheduler
        HEAD.replace("[scheduler]\nname = \"rr\"\n", ""),
        // a missing host
        HEAD.replace("[host]\ncores_per_socket = 2\n", ""),
        // a bad value in the simulator's [kvm]
        format!("{HEAD}\n[kvm]\nple = 3\n"),
        format!("{HEAD}\n[kvm]\nversion = \"6-banana\"\n"),
        // an unknown key in [[vm]]
        HEAD.replace("vcpus = 2", "vcpus = 2\nvcpu_polcy = 1"),
    ] {
        let msg = err(&text);
        assert!(!msg.contains("real-KVM"), "{msg}\nfor:\n{text}");
    }
    // Every shipped simulator scenario still validates.
    let sims = repo_root().join("scenarios");
    for entry in std::fs::read_dir(&sims).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            Scenario::from_toml_str(&text, &path.to_string_lossy())
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
