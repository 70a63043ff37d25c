//! What a JavaScript call costs, in fuel: wasm instructions, so the same on any machine however
//! loaded (time is the benches' to print). Two things the JavaScript kit does for it, each with a
//! bound here that fails without it:
//!
//! - It warms the global componentize-js's bindings run in (`sdk/js/zundoko-kit/bindings-realm.js`):
//!   SpiderMonkey makes a global's standard classes on first use, and every call starts from the
//!   snapshot, so a call made String's methods, Promise, Uint8Array and BigInt again each time.
//!   The classic rules at 5 children: 2.22M fuel without, 1.03M with both.
//! - Its build makes each export read its input through one view of memory
//!   (`sdk/js/lift-view.mjs`), not a `dataView($memory)` per field: each child 75k fuel without,
//!   about 35k with.
//!
//! The module is `target/modules/zundoko-classic-js.wasm` (`make guest-langs`, which needs node
//! and npm); without it the test says so loudly and passes, except in CI, where it fails.

mod common;

use std::path::PathBuf;

use zundoko_operator::supply::sandbox::{RulesModule, SandboxEngine, SandboxLimits};
use zundoko_rules::naming::zundoko_name;
use zundoko_rules::{Observed, Said};

const MODULE: &str = "zundoko-classic-js";

/// A call at 5 children without the warmed global took 2.22M fuel (the lift's view alone leaves
/// it at 1.9M); with the warm-up alone 1.41M, with both 1.03M.
const MOST_FUEL_AT_5: u64 = 1_300_000;
/// Each child's lift (100 children against 5): 75k fuel read field by field, 35k through one
/// view.
const MOST_FUEL_PER_CHILD: u64 = 50_000;

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
fn a_javascript_call_starts_from_warmed_bindings_and_lifts_through_one_view() {
    let Some(module) = module() else { return };
    let at_5 = fuel(&module, 5);
    let at_100 = fuel(&module, 100);
    let per_child = (at_100 - at_5) / 95;
    println!("classic JavaScript rules: {at_5} fuel at 5 children, {at_100} at 100: {per_child} per child");
    assert!(at_5 <= MOST_FUEL_AT_5, "a call at 5 children took {at_5} fuel (at most {MOST_FUEL_AT_5}): is the bindings' global warmed in the snapshot?");
    assert!(
        per_child <= MOST_FUEL_PER_CHILD,
        "each child took {per_child} fuel (at most {MOST_FUEL_PER_CHILD}): do the exports lift through one view (sdk/js/lift-view.mjs)?"
    );
}
