//! A signature payload of any bytes, signed by the trusted key or carrying any signature.
#![no_main]
// The invariants and the byte-driven inputs of the property tests, by path: one statement of
// each, whichever chooses the inputs.
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/draw.rs"]
mod draw;
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/invariants.rs"]
mod invariants;

const DIGEST: &str = "sha256:3075915c3075915c3075915c3075915c3075915c3075915c3075915c3075915c";

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&how, payload)) = data.split_first() else { return };
    let identity = (how & 2 != 0).then_some("127.0.0.1:5000/rules/ja");
    let garbage = String::from_utf8_lossy(payload);
    invariants::signature(payload, how & 1 != 0, &garbage, DIGEST, identity);
});
