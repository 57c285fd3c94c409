//! Arbitrary bytes as a scenario (TOML, and JSON): parsing must return Ok or a
//! ScenarioError, never panic, hang or exhaust memory.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vcpulab_core::Scenario;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Scenario::from_toml_str(text, "fuzz.toml");
        let _ = Scenario::from_json_str(text, "fuzz.json");
    }
});
