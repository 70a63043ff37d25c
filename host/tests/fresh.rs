//! A fresh instance per call, for modules with a language runtime in them (CPython and
//! SpiderMonkey, whose snapshot is megabytes of pre-initialised heap): nothing a call leaves in
//! memory is seen by the next, whether the next call reuses the same pool slot (one slot, many
//! calls in a row, a call that failed on its memory cap in between) or calls run at once.
//! sandbox.rs shows the same for a Rust module.
//!
//! The fixtures, `target/fixtures/zundoko-py-fresh.wasm` and `zundoko-js-fresh.wasm` (`make
//! fixtures-langs`), count their calls in globals and keep `hoard-kib` KiB per call in a global
//! list; each call says `calls N, hoard M`, so every call must say `calls 1, hoard 1`. Without
//! them the tests say so loudly and pass, except in CI (CI=true), where they fail.

mod common;

use std::path::PathBuf;

use common::compile_once::LoadOnce as _;
use common::fixture_path;
use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine, SandboxLimits};
use zundoko_rules::{Action, Observed, Plan};

const FIXTURES: [&str; 2] = ["zundoko-py-fresh", "zundoko-js-fresh"];

/// The fixture's bytes, or None (said loudly; a failure in CI) when it was not built.
fn fixture(name: &str) -> Option<Vec<u8>> {
    let path = fixture_path(name);
    if path.exists() {
        return Some(std::fs::read(&path).unwrap());
    }
    common::ci::cannot_run(&format!("{} is missing: build it with `make fixtures-langs` (needs python3 with venv, node)", path.display()));
    None
}

/// An engine with `slots` pool slots. An interpreter's component takes tens of seconds to
/// compile in a debug build: the code is shared with languages.rs through its cache in target/.
fn engine(slots: u32) -> SandboxEngine {
    SandboxEngine::new(SandboxLimits { max_concurrent_calls: slots, ..SandboxLimits::default() })
        .unwrap()
        .with_compiled_cache(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache"))
        .unwrap()
}

fn load(engine: &SandboxEngine, name: &str, bytes: &[u8]) -> RulesModule {
    engine.load_once(bytes).unwrap_or_else(|e| panic!("{name} loads: {e}"))
}

fn hoarding(kib: u32) -> Observed {
    common::observed_with(&[("hoard-kib", &kib.to_string())])
}

/// What the fixture says: its status message, and its requeue-after (the call count again).
fn said(plan: &Plan) -> (String, Option<u64>) {
    let message = plan.actions.iter().find_map(|a| match a {
        Action::SetStatus(status) => Some(status.message.clone()),
        _ => None,
    });
    let requeue = plan.actions.iter().find_map(|a| match a {
        Action::RequeueAfter(millis) => Some(*millis),
        _ => None,
    });
    (message.unwrap_or_else(|| panic!("no status in {plan:?}")), requeue)
}

fn first_call(module: &RulesModule, name: &str, input: &Observed, what: &str) {
    let plan = module.reconcile(input).unwrap_or_else(|e| panic!("{name}, {what}: {e}")).value;
    assert_eq!(said(&plan), ("calls 1, hoard 1".to_string(), Some(1)), "{name}, {what}: the guest's memory outlived a call");
}

#[test]
fn each_call_of_a_python_or_javascript_module_starts_from_a_fresh_instance() {
    // A small pool: 16 slots (a CPython component is more than 8 core instances), so forty
    // calls in a row reuse its memory slots with what the calls before wrote in them (a
    // megabyte of heap or more, eight now and then).
    let engine = engine(16);
    for name in FIXTURES {
        let Some(bytes) = fixture(name) else { continue };
        let module = load(&engine, name, &bytes);
        for call in 0..40 {
            let kib = if call % 10 == 5 { 8 << 10 } else { 1 << 10 };
            first_call(&module, name, &hoarding(kib), &format!("call {call}, {kib} KiB"));
            if call % 10 == 9 {
                // A call that ends on its memory cap, its heap full, changes nothing either.
                let e = module.reconcile(&hoarding(1 << 20)).err().unwrap_or_else(|| panic!("{name}: 1 GiB fits in no budget"));
                assert!(matches!(e, GuestError::MemoryCap { .. }), "{name}: {e}");
            }
        }
    }
}

#[test]
fn calls_at_once_each_start_from_a_fresh_instance() {
    // Calls on several threads at once, each in a slot of its own, slots reused in turn.
    let engine = engine(SandboxLimits::default().max_concurrent_calls);
    for name in FIXTURES {
        let Some(bytes) = fixture(name) else { continue };
        let module = load(&engine, name, &bytes);
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let module = &module;
                scope.spawn(move || {
                    for call in 0..8 {
                        first_call(module, name, &hoarding(1 << 10), &format!("thread {thread}, call {call}"));
                    }
                });
            }
        });
    }
}
