//! A guest's values as the host converts them: plans whole, rule errors and metadata bounded.
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
    match d.byte() % 3 {
        0 => {
            let observed = d.observed();
            invariants::guest_plan(draw::to_guest(&d.plan(&observed)));
        }
        1 => {
            let kind = d.byte();
            invariants::guest_rule_error(kind, &d.text(600));
        }
        _ => {
            let (name, version, description) = (d.text(80), d.text(40), d.text(300));
            invariants::guest_module_info(&name, &version, &description);
        }
    }
});
