//! Stable-Rust stand-in for the cargo-fuzz targets (fuzz/), run on every `cargo test`:
//! the shipped scenario files mutated with a seeded RNG (byte flips, deleted lines,
//! values swapped between keys, hostile numbers and durations). Each case must parse to
//! Ok or a ScenarioError without panicking; those that parse are run briefly with the
//! invariant checks on and must not fail other than "cannot make progress".

mod common;

use vcpulab_core::api::{self, RunOptions};
use vcpulab_core::rng::Rng;
use vcpulab_core::time::SimDuration;
use vcpulab_core::{Error, Scenario};

/// The test's seeded stream (the crate's own generator, so no second RNG to trust).
struct Cases(Rng);
impl Cases {
    fn below(&mut self, n: usize) -> usize {
        self.0.below(n.max(1) as u64) as usize
    }
}

const HOSTILE: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-0.0",
    "nan",
    "inf",
    "18446744073709551615",
    "9223372036854775807",
    "\"\"",
    "\"0s\"",
    "\"-1ms\"",
    "\"1ns\"",
    "\"8760h\"",
    "\"99999999h\"",
    "\"1e30s\"",
    "\"0-99999\"",
    "\"3-1\"",
    "[]",
    "{}",
    "[[]]",
    "true",
    "\"all\"",
    "[0, 99]",
    "{ dist = \"exp\", mean = \"0s\" }",
    "{ dist = \"uniform\", min = \"2ms\", max = \"1ms\" }",
    "{ dist = \"lognormal\", median = \"1ms\", sigma = 1e9 }",
    "1979-05-27T07:32:00Z",
];

fn mutate(text: &str, rng: &mut Cases) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.below(3) {
        if lines.is_empty() {
            break;
        }
        let i = rng.below(lines.len());
        match rng.below(5) {
            // flip a byte (kept as valid UTF-8 by going through lossy conversion)
            0 => {
                let mut b = lines[i].clone().into_bytes();
                if !b.is_empty() {
                    let j = rng.below(b.len());
                    b[j] ^= 1 << rng.below(7);
                }
                lines[i] = String::from_utf8_lossy(&b).into_owned();
            }
            // delete a line (a key, or a table header)
            1 => {
                lines.remove(i);
            }
            // swap in the value of another key
            2 => {
                let j = rng.below(lines.len());
                if let (Some((k, _)), Some((_, v))) =
                    (lines[i].split_once('='), lines[j].split_once('='))
                {
                    lines[i] = format!("{k}={v}");
                }
            }
            // a hostile value
            3 => {
                if let Some((k, _)) = lines[i].split_once('=') {
                    lines[i] = format!("{k}= {}", HOSTILE[rng.below(HOSTILE.len())]);
                }
            }
            // duplicate a line (duplicate keys, repeated [[vm]])
            _ => {
                let l = lines[i].clone();
                lines.insert(i, l);
            }
        }
    }
    lines.join("\n")
}

#[test]
fn mutated_scenarios_never_panic() {
    let files = common::shipped_toml_files(true);
    let seeds: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let mut rng = Cases(Rng::derive(1, &["test", "mutation"]));
    let (mut parsed, mut ran) = (0, 0);
    let cases = 20000;
    for case in 0..cases {
        let text = mutate(&seeds[case % seeds.len()], &mut rng);
        let result = std::panic::catch_unwind(|| Scenario::from_toml_str(&text, "mutated.toml"));
        let sc = match result {
            Err(_) => panic!("case {case}: the parser panicked on:\n{text}"),
            Ok(Err(_)) => continue,
            Ok(Ok(sc)) => sc,
        };
        parsed += 1;
        let mut sc = sc;
        if sc.host.ncpus() > 64 || sc.vms.iter().map(|v| v.vcpus as u64).sum::<u64>() > 256 {
            continue;
        }
        sc.duration = sc.duration.min(SimDuration::from_ms(2));
        sc.warmup = SimDuration::ZERO;
        if api::estimate_events(&sc) > 1e5 {
            continue;
        }
        ran += 1;
        let opts = RunOptions {
            check_invariants: true,
            ..Default::default()
        };
        if let Err(Error::Sim(e)) = api::run(&sc, None, &opts) {
            assert!(
                e.message.contains("without time passing"),
                "case {case}: {e}\n--- scenario ---\n{text}"
            );
        }
    }
    eprintln!("{cases} mutated scenarios: {parsed} parsed, {ran} ran");
    assert!(
        parsed > cases / 20 && ran > cases / 50,
        "parsed {parsed}, ran {ran}: the mutations are too destructive"
    );
}
