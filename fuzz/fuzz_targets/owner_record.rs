//! An owner record (`DIR/owners/`, `cache_shares.rs`) of any bytes, or one near the operator's
//! own, parsed with a verifier that accepts one MAC per label.
#![no_main]
// The invariants and the byte-driven inputs of the property tests, by path: one statement of
// each, whichever chooses the inputs.
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/draw.rs"]
mod draw;
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/cache_invariants.rs"]
mod cache_invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = draw::Draw::new(data);
    let record = if d.chance(64) { d.rest().to_vec() } else { cache_invariants::owner_record_near_valid(&mut d) };
    cache_invariants::owner_record(&record);
});
