//! The plan check on any plan: never a panic; every plan accepted keeps the contract.
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
    let (observed, limits) = (d.observed(), d.limits());
    let plan = d.plan(&observed);
    invariants::plan_check(&plan, &observed, &limits);
});
