//! The budget section of any bytes, and of a component with any sections before it.
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
    invariants::budget_section(data);
    let mut d = draw::Draw::new(data);
    let sections: Vec<(String, Vec<u8>)> = (0..d.below(3))
        .map(|_| {
            let name = if d.chance(128) { "zundoko:budget".to_string() } else { d.text(16) };
            (name, (0..d.below(32)).map(|_| d.byte()).collect())
        })
        .collect();
    invariants::budget_round_trip(&sections, d.rest());
});

