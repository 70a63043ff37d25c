//! A registry's manifest of any bytes.
#![no_main]
// The invariants and the byte-driven inputs of the property tests, by path: one statement of
// each, whichever chooses the inputs.
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/draw.rs"]
mod draw;
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/invariants.rs"]
mod invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    invariants::manifest(data);
});
