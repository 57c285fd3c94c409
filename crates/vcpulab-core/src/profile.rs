//! Host profiles (`[host] profile = "FILE"`): measured costs and noise of a real host,
//! written by `vcpulab kvm calibrate`, that stand in for the defaults of `[host.costs]`,
//! `[host.noise]` and `[kvm]` keys. A key the scenario sets itself wins; `[kvm]` values apply only to a scenario with
//! a `[kvm]` table (a profile does not turn the KVM model on). `[profile]` is the record of
//! where the numbers come from (date, kernel, CPUs, load, command, raw measurements); the
//! reader checks only that it is a table.
//!
//! A profile is named by a file path (relative paths from the scenario file's directory,
//! or from the working directory for scenarios that are not files) or by the name of a
//! profile shipped with vcpulab ([`SHIPPED`]).

use crate::error::ScenarioError;
use crate::reader::Table;
use toml::Value;

type Res<T> = Result<T, ScenarioError>;

/// Profiles shipped with vcpulab: (name, text). Each was written by `vcpulab kvm
/// calibrate` on the machine it names; its `[profile]` table says when and how.
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "pvm-xeon-2cpu",
        include_str!("../profiles/pvm-xeon-2cpu.toml"),
    ),
    (
        "pvm-epyc-2cpu",
        include_str!("../profiles/pvm-epyc-2cpu.toml"),
    ),
    (
        "pvm-xeon-2cpu-v1252",
        include_str!("../profiles/pvm-xeon-2cpu-v1252.toml"),
    ),
];

/// `[kvm]` keys a profile may set: the costs of exits and wake-ups, not policy.
const KVM_KEYS: &[&str] = &["ple_exit_cost", "halt_wakeup_cost", "world_switch_cost"];

/// `[harness]` keys: measurements of the KVM harness itself on that host, which only
/// `vcpulab kvm compare` reads (for the simulated side of its cases); a scenario with the
/// profile does not see them. `send_hold`: how long the harness's vCPU thread runs, back on
/// a pCPU after its waker preempted it, before it unlocks the waker's channel
/// (`scripts/kvm_waker_inversion.py` on `perf sched` traces). `spin_ns`: one iteration of
/// the guest lock programs' wait loop, PAUSE and the loop around it, in ns as a number
/// (durations are whole ns, and a spin is ~10-25 ns; `vcpulab kvm calibrate`, guest
/// program `spin`), which sizes the simulated user-space PLE window. `halt_wakeup_cost`: the
/// wake-up of the harness's user-space halt (an exit to the VMM, which blocks on an eventfd,
/// then KVM_RUN again; guest program `wake`), which only the harness's halt pays; a guest's
/// own halt stays in the kernel, whose wake-up is `[kvm] halt_wakeup_cost`.
const HARNESS_KEYS: &[&str] = &["send_hold", "spin_ns", "halt_wakeup_cost"];

/// If the scenario names a profile, the scenario with the profile's values merged in and
/// `host.profile` removed; else `None`.
pub fn apply(v: &Value, origin: &str) -> Res<Option<Value>> {
    let Some(name) = v.get("host").and_then(|h| h.get("profile")) else {
        return Ok(None);
    };
    let Some(name) = name.as_str() else {
        return Err(ScenarioError::new(
            origin,
            "host.profile",
            "expected a string: a profile file, or a shipped profile's name",
        ));
    };
    let (source, text) = load(name, origin)?;
    let prof: Value = text
        .parse::<toml::Table>()
        .map(Value::Table)
        .map_err(|e| ScenarioError::new(&source, "", format!("invalid TOML: {}", e.message())))?;
    check(&prof, &source)?;
    let mut out = v.clone();
    let root = out.as_table_mut().expect("a scenario is a table");
    let host = root
        .get_mut("host")
        .and_then(Value::as_table_mut)
        .expect("host.profile was found in a host table");
    host.remove("profile");
    if let Some(h) = prof.get("host") {
        fill(host, h.as_table().expect("checked"));
    }
    if let Some(k) = prof.get("kvm") {
        if let Some(mine) = root.get_mut("kvm").and_then(Value::as_table_mut) {
            fill(mine, k.as_table().expect("checked"));
        }
    }
    Ok(Some(out))
}

/// Inserts the profile's keys the scenario does not set, table by table (`costs`,
/// `costs.migration`, `noise`). A distribution (`noise.interrupt_duration`,
/// `kvm.ple_exit_cost`) is one value:
/// the scenario's replaces the profile's whole.
fn fill(mine: &mut toml::Table, prof: &toml::Table) {
    for (k, pv) in prof {
        match (mine.get_mut(k), pv) {
            (None, _) => {
                mine.insert(k.clone(), pv.clone());
            }
            (Some(Value::Table(m)), Value::Table(p)) if !p.contains_key("dist") => fill(m, p),
            (Some(_), _) => {}
        }
    }
}

fn load(name: &str, origin: &str) -> Res<(String, String)> {
    if let Some((n, text)) = SHIPPED.iter().find(|(n, _)| *n == name) {
        return Ok((format!("<shipped profile {n}>"), text.to_string()));
    }
    let path = std::path::Path::new(name);
    let path = if path.is_relative() && std::path::Path::new(origin).is_file() {
        std::path::Path::new(origin)
            .parent()
            .unwrap_or(std::path::Path::new(""))
            .join(path)
    } else {
        path.to_path_buf()
    };
    let shown = path.display().to_string();
    std::fs::read_to_string(&path)
        .map(|t| (shown.clone(), t))
        .map_err(|e| {
            let shipped: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
            ScenarioError::new(
                origin,
                "host.profile",
                format!(
                    "cannot read the profile {shown:?}: {e}; give a file, or a shipped profile: {}",
                    shipped.join(", ")
                ),
            )
        })
}

/// The profile's own errors name the profile, the key and what is allowed.
fn check(prof: &Value, source: &str) -> Res<()> {
    let root = Table::root(source, prof)?;
    if let Some(p) = root.get("profile") {
        p.table()?;
    }
    if let Some(h) = root.get("host") {
        let h = h.table()?;
        if let Some(c) = h.get("costs") {
            crate::scenario::parse_costs(&c.table()?)?;
        }
        if let Some(n) = h.get("noise") {
            crate::scenario::parse_noise(&n.table()?)?;
        }
        h.finish(&["costs", "noise"])?;
    }
    // `[kvm]` and `[harness]` hold durations, or distributions of them (measured latencies),
    // but for the spin, a number of ns.
    for (name, keys) in [("kvm", KVM_KEYS), ("harness", HARNESS_KEYS)] {
        if let Some(t) = root.get(name) {
            let t = t.table()?;
            for key in keys {
                if *key == "spin_ns" {
                    t.opt_f64(key, 0.1, 1e6)?;
                } else if let Some(v) = t.get(key) {
                    crate::workload::parse_dist(&v)?;
                }
            }
            t.finish(keys)?;
        }
    }
    root.finish(&["profile", "host", "kvm", "harness"])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Value {
        let text = format!(
            "duration = \"1s\"\n[host]\ncores_per_socket = 2\nprofile = \"pvm-xeon-2cpu\"\n{extra}\n[scheduler]\nname = \"eevdf\"\n"
        );
        Value::Table(text.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn shipped_profile_fills_kvm_costs_only_where_the_scenario_is_silent() {
        let v = scenario("[kvm]\nple_exit_cost = \"3us\"\n");
        let out = apply(&v, "<test>").unwrap().unwrap();
        let kvm = out.get("kvm").unwrap();
        assert_eq!(kvm.get("ple_exit_cost").unwrap().as_str(), Some("3us"));
        // pvm-xeon-2cpu predates the interrupt wake-up: its `[harness] halt_wakeup_cost`
        // (the harness's user-space halt) is not a guest halt's and stays out.
        assert!(kvm.get("halt_wakeup_cost").is_none());
        assert!(out["host"].get("profile").is_none());
        let v = scenario("[kvm]\nhalt_wakeup_cost = \"3us\"\n");
        let out = apply(&v, "<test>").unwrap().unwrap();
        let kvm = out.get("kvm").unwrap();
        assert_eq!(kvm.get("halt_wakeup_cost").unwrap().as_str(), Some("3us"));
        assert_eq!(kvm.get("ple_exit_cost").unwrap().as_str(), Some("69.9us"));
        // A profile with the interrupt wake-up fills it where the scenario is silent, and
        // the scenario's own value wins.
        let v1252 = |kvm: &str| {
            let mut v = scenario(kvm);
            v["host"]["profile"] = Value::String("pvm-xeon-2cpu-v1252".into());
            apply(&v, "<test>").unwrap().unwrap()
        };
        let out = v1252("[kvm]\nple = true\n");
        assert_eq!(
            out["kvm"]["halt_wakeup_cost"]["median"].as_str(),
            Some("12.2us")
        );
        let out = v1252("[kvm]\nhalt_wakeup_cost = \"3us\"\n");
        assert_eq!(out["kvm"]["halt_wakeup_cost"].as_str(), Some("3us"));
    }

    #[test]
    fn a_profile_does_not_turn_the_kvm_model_on() {
        let out = apply(&scenario(""), "<test>").unwrap().unwrap();
        assert!(out.get("kvm").is_none());
    }

    #[test]
    fn bad_profiles_are_named_with_key_and_what_is_allowed() {
        let mut v = scenario("");
        v["host"].as_table_mut().unwrap().insert(
            "profile".into(),
            Value::String("/nonexistent/p.toml".into()),
        );
        let e = apply(&v, "s.toml").unwrap_err();
        assert_eq!(e.path, "host.profile");
        assert!(e.message.contains("pvm-xeon-2cpu"), "{}", e.message);
        let dir = std::env::temp_dir().join(format!("vcpulab-profile-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.toml");
        std::fs::write(&p, "[kvm]\nple = false\n").unwrap();
        v["host"]
            .as_table_mut()
            .unwrap()
            .insert("profile".into(), Value::String(p.display().to_string()));
        let e = apply(&v, "s.toml").unwrap_err();
        assert_eq!(e.origin, p.display().to_string());
        assert!(e.path.contains("ple"), "{e:?}");
        assert!(e.message.contains("halt_wakeup_cost"), "{}", e.message);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A profile's `[harness]` table is checked like its other keys and stays out of the
    /// scenario: it is `vcpulab kvm compare`'s, not the simulated host's.
    #[test]
    fn harness_keys_are_checked_and_not_applied() {
        let dir =
            std::env::temp_dir().join(format!("vcpulab-profile-harness-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let with = |text: &str| {
            let p = dir.join("p.toml");
            std::fs::write(&p, text).unwrap();
            let mut v = scenario("");
            v["host"]
                .as_table_mut()
                .unwrap()
                .insert("profile".into(), Value::String(p.display().to_string()));
            apply(&v, "s.toml")
        };
        let good =
            "[harness]\nsend_hold = { dist = \"lognormal\", median = \"2us\", sigma = 2.12 }\n";
        let out = with(good).unwrap().unwrap();
        assert!(out.get("harness").is_none());
        let e = with("[harness]\nsend_hld = \"2us\"\n").unwrap_err();
        assert!(e.path.contains("send_hld"), "{e:?}");
        assert!(e.message.contains("send_hold"), "{}", e.message);
        let e = with("[harness]\nsend_hold = \"soon\"\n").unwrap_err();
        assert!(e.path.contains("send_hold"), "{e:?}");
        assert!(with("[harness]\nspin_ns = 11.5\n").is_ok());
        assert!(with("[harness]\nhalt_wakeup_cost = \"36.9us\"\n").is_ok());
        let e = with("[harness]\nhalt_wakeup_cost = \"later\"\n").unwrap_err();
        assert!(e.path.contains("halt_wakeup_cost"), "{e:?}");
        for bad in ["\"11ns\"", "0", "-3.0", "1e7"] {
            let e = with(&format!("[harness]\nspin_ns = {bad}\n")).unwrap_err();
            assert!(e.path.contains("spin_ns"), "{bad}: {e:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_shipped_profile_is_valid() {
        for (n, text) in SHIPPED {
            let v: Value = Value::Table(text.parse::<toml::Table>().unwrap());
            check(&v, n).unwrap();
            assert!(v["profile"].get("measured").is_some(), "{n}: no date");
            assert!(v["profile"].get("command").is_some(), "{n}: no command");
        }
    }
}
