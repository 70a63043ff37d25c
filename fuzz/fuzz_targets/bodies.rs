//! A registry's answers: an error body of any bytes, and any body in any chunks under any cap.
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
    let mut d = draw::Draw::new(data);
    let status = 100 + d.below(900) as u16;
    let (limit, length_known) = (d.below(600), d.chance(128));
    let chunks: Vec<Vec<u8>> = (0..d.below(10)).map(|_| (0..d.below(120)).map(|_| d.byte()).collect()).collect();
    invariants::capped_body(&chunks, limit, length_known);
    invariants::error_body(status, data);
});
