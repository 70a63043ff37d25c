//! What a JavaScript call costs, in fuel: wasm instructions, so the same on any machine however
//! loaded (time is the benches' to print). What the JavaScript kit does for it, each with a bound
//! here that fails without it (the classic rules; fuel at 5 children, and per child from 5 to 100):
//!
//! - It warms the global componentize-js's bindings run in (`sdk/js/zundoko-kit/bindings-realm.js`):
//!   SpiderMonkey makes a global's standard classes on first use, and every call starts from the
//!   snapshot, so every call made String's methods, Promise, Uint8Array and BigInt again. Without
//!   it: 1.32M at 5 children.
//! - Its build rewrites the bindings (`sdk/js/bindings-rewrite.mjs`): an export lifts its input
//!   through one view of memory, not a `dataView($memory)` per field (without: 76k per child);
//!   it does not free the lifted input in an instance dropped after the call (without: 33.7k per
//!   child, 0.92M at 5 children); it lowers a string with the engine's encoder, not a count of
//!   its UTF-8 bytes in interpreted JavaScript (without: 1.03M at 5 children).
//!
//! With all of them: 0.88M at 5 children and 30k per child, against 2.22M and 76k before.
//!
//! The module is `target/modules/zundoko-classic-js.wasm` (`make guest-langs`, which needs node
//! and npm); without it the test says so loudly and passes, except in CI, where it fails.

mod common;

use std::path::PathBuf;

use zundoko_operator::supply::sandbox::{RulesModule, SandboxEngine, SandboxLimits};
use zundoko_rules::naming::zundoko_name;
use zundoko_rules::{Observed, Said};

const MODULE: &str = "zundoko-classic-js";

/// 0.88M with everything; 0.92M freeing the lifted input, 1.03M with the generated string encoder,
/// 1.32M without the warm-up.
const MOST_FUEL_AT_5: u64 = 960_000;
/// 30k with everything; 33.7k freeing the lifted input, 76k reading field by field.
const MOST_FUEL_PER_CHILD: u64 = 32_000;

fn module() -> Option<RulesModule> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules").join(format!("{MODULE}.wasm"));
    if !path.exists() {
        common::ci::cannot_run(&format!("{} is missing: build it with `make guest-langs` (needs node and npm)", path.display()));
        return None;
    }
    // The same engine and cache as languages.rs: SpiderMonkey compiles once for both.
    let engine = SandboxEngine::new(SandboxLimits { fuel: 2_000_000_000, memory_bytes: 256 << 20, inline_fuel: 2_000_000_000, ..SandboxLimits::default() })
        .unwrap()
        .with_compiled_cache(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache"))
        .unwrap();
    Some(engine.load(&std::fs::read(&path).unwrap()).unwrap())
}

/// A Hikawa mid-song with `children` words said, the last long ago: the rules say the next.
fn mid_song(children: u32) -> Observed {
    let mut observed = zundoko_rules::testing::new_hikawa(500, &[]);
    observed.now = 5_000_000;
    observed.entropy = 11;
    observed.zundokos = (1..=children)
        .map(|i| Said { name: zundoko_name(&observed.hikawa.name, i), index: i, word: if i % 3 == 0 { "Doko" } else { "Zun" }.into(), said_at: Some(1_000_000) })
        .collect();
    observed
}

fn fuel(module: &RulesModule, children: u32) -> u64 {
    let outcome = module.reconcile(&mid_song(children)).unwrap();
    assert!(outcome.value.says().next().is_some(), "at {children} children the rules say a word: {:?}", outcome.value);
    outcome.fuel_used
}

#[test]
fn a_javascript_call_starts_from_warmed_bindings_rewritten_for_its_cost() {
    let Some(module) = module() else { return };
    let at_5 = fuel(&module, 5);
    let at_100 = fuel(&module, 100);
    let per_child = (at_100 - at_5) / 95;
    println!("classic JavaScript rules: {at_5} fuel at 5 children, {at_100} at 100: {per_child} per child");
    assert!(at_5 <= MOST_FUEL_AT_5, "a call at 5 children took {at_5} fuel (at most {MOST_FUEL_AT_5}): is the bindings' global warmed in the snapshot, and do they lower strings with the native encoder (sdk/js/bindings-rewrite.mjs)?");
    assert!(
        per_child <= MOST_FUEL_PER_CHILD,
        "each child took {per_child} fuel (at most {MOST_FUEL_PER_CHILD}): do the exports lift through one view, freeing nothing (sdk/js/bindings-rewrite.mjs)?"
    );
}
