//! The shipped modules' decisions against the same rules linked natively, on any observed
//! state (target/modules/, built by `make guest`, which `make fuzz` runs first).
#![no_main]
// The invariants and the byte-driven inputs of the property tests, by path: one statement of
// each, whichever chooses the inputs.
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/draw.rs"]
mod draw;
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/invariants.rs"]
mod invariants;

use std::sync::{Arc, OnceLock};

use zundoko_operator::supply::contract::rules::{NativeRules, Rules};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

type Pair = (Arc<dyn Rules>, Arc<dyn Rules>);

fn pairs() -> &'static [Pair] {
    static PAIRS: OnceLock<Vec<Pair>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        let engine = SandboxEngine::new(SandboxLimits::default()).expect("an engine");
        let load = |name: &str| -> Arc<dyn Rules> {
            let path = format!("{}/../target/modules/{name}.wasm", env!("CARGO_MANIFEST_DIR"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e} (run make guest)"));
            Arc::new(engine.load(&bytes).expect("a shipped module loads"))
        };
        vec![
            (Arc::new(NativeRules::new(zundoko_rules::classic())), load("zundoko-classic")),
            (Arc::new(NativeRules::new(zundoko_rules::strict_japanese())), load("zundoko-strict-ja")),
        ]
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = draw::Draw::new(data);
    let (native, module) = &pairs()[d.byte() as usize % 2];
    invariants::same_decision(native.as_ref(), module.as_ref(), &d.any_observed());
});
