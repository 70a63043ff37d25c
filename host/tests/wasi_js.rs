//! A JavaScript module (componentize-js's StarlingMonkey, built by the kit) gets the same
//! virtual WASI as a Python one (wasi.rs): `Date.now()` is the call's `now`, `Math.random()`
//! comes from the call's entropy, `performance.now()` is the virtual monotonic clock, so a call
//! replays exactly; and whatever the module does (throw, loop, allocate) the call ends with a
//! result or a named reason, within its budget.
//!
//! The fixture is `target/fixtures/zundoko-js-hostile.wasm` (`make fixtures-langs`, which needs
//! node and npm), whose behaviour a Hikawa's `spec.params.misbehave` picks; otherwise it sings
//! the classic rules. Without it the tests say so loudly and pass, except in CI (CI=true),
//! where they fail.

mod common;

use std::sync::OnceLock;

use common::fixture_path;
use common::compile_once::LoadOnce as _;
use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine, SandboxLimits};
use zundoko_rules::Observed;

const FIXTURE: &str = "zundoko-js-hostile";
const NOW_MS: i64 = 1_767_225_600_123;

/// A compiled-module cache shared by the test runs (SpiderMonkey takes long to compile in a
/// debug build; its code is reused from here).
fn cache_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/wasi-js-tests")
}

/// Whether the fixture was built; if not, said loudly (and a failure in CI).
fn built() -> bool {
    let path = fixture_path(FIXTURE);
    if path.exists() {
        return true;
    }
    common::ci::cannot_run(&format!("{} is missing: build it with `make fixtures-langs` (needs node and npm)", path.display()));
    false
}

/// The fixture, loaded once for all the tests in this file.
fn module() -> &'static RulesModule {
    static MODULE: OnceLock<RulesModule> = OnceLock::new();
    MODULE.get_or_init(|| {
        let bytes = std::fs::read(fixture_path(FIXTURE)).unwrap();
        let engine = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&cache_dir()).unwrap();
        let module = engine.load_once(&bytes).unwrap_or_else(|e| panic!("the JavaScript fixture loads: {e}"));
        assert!(module.uses_wasi(), "a kit-built JavaScript component imports the clocks and random of WASI");
        module
    })
}

fn hikawa(misbehave: &str, now: i64, entropy: u64) -> Observed {
    Observed { now, entropy, ..common::observed_with(&[("misbehave", misbehave)]) }
}

use common::status_message as message;

#[test]
fn a_javascript_module_that_behaves_sings_and_its_calls_replay_exactly() {
    if !built() {
        return;
    }
    let module = module();
    let observed = hikawa("", NOW_MS, 42);
    let first = module.reconcile(&observed).unwrap();
    let again = module.reconcile(&observed).unwrap();
    assert_eq!(first.value, again.value, "the same input decides the same");
    assert_eq!(first.fuel_used, again.fuel_used, "and costs the same fuel");
    assert!(first.value.says().next().is_some(), "a new Hikawa's first word: {:?}", first.value);
}

#[test]
fn an_uncaught_exception_fails_the_call_naming_it() {
    if !built() {
        return;
    }
    match module().reconcile(&hikawa("throw", NOW_MS, 1)) {
        Err(GuestError::Trap { guest_message: Some(said), .. }) => {
            assert_eq!(said, "Error: hostile: thrown on purpose", "what was thrown, as the kit logged it");
        }
        other => panic!("expected a trap naming the exception, got {other:?}"),
    }
    match module().reconcile(&hikawa("rule-error", NOW_MS, 1)) {
        Err(GuestError::Rules(e)) => {
            assert_eq!(e.to_string(), "InvalidParams: hostile: params.misbehave asked for a rule error");
            assert_eq!(GuestError::Rules(e).reason(), "InvalidParams");
        }
        other => panic!("expected the rules' own error, got {other:?}"),
    }
}

/// The build's bindings call a rule set synchronously (sdk/js/bindings-rewrite.mjs, rewrite 4): a
/// `reconcile` that returns a Promise is refused by the kit, by name, not awaited and not lowered
/// as if it were a plan.
#[test]
fn a_reconcile_returning_a_promise_fails_the_call_naming_it() {
    if !built() {
        return;
    }
    match module().reconcile(&hikawa("async", NOW_MS, 1)) {
        Err(GuestError::Trap { guest_message: Some(said), .. }) => assert!(
            said.starts_with("TypeError: reconcile returned a Promise: rules decide synchronously"),
            "what the kit logged: {said}"
        ),
        other => panic!("expected a trap naming the Promise, got {other:?}"),
    }
    assert!(module().reconcile(&hikawa("", NOW_MS, 3)).is_ok(), "and the module still serves");
}

#[test]
fn an_endless_loop_and_endless_allocation_stop_at_the_budget() {
    if !built() {
        return;
    }
    let module = module();
    match module.reconcile(&hikawa("loop", NOW_MS, 1)) {
        Err(GuestError::OutOfCpuBudget { budget }) => assert_eq!(budget, module.limits().fuel),
        other => panic!("expected OutOfCpuBudget, got {other:?}"),
    }
    // SpiderMonkey asks for more memory and the cap refuses it: the memory cap, by name, not
    // just any trap.
    match module.reconcile(&hikawa("alloc", NOW_MS, 1)) {
        Err(GuestError::MemoryCap { limit, requested }) => {
            assert_eq!(limit, module.limits().memory_bytes);
            assert!(requested > limit, "{requested} > {limit}");
        }
        other => panic!("expected MemoryCapExceeded, got {other:?}"),
    }
    // And the module still serves.
    assert!(module.reconcile(&hikawa("", NOW_MS, 3)).is_ok());
}

#[test]
fn date_now_is_the_calls_now() {
    if !built() {
        return;
    }
    let clock = |now, entropy| message(&module().reconcile(&hikawa("clock", now, entropy)).unwrap().value);
    assert_eq!(clock(NOW_MS, 1), format!("clock: Date.now {NOW_MS}, new Date 2026-01-01T00:00:00.123Z"));
    assert_eq!(clock(NOW_MS, 1), clock(NOW_MS, 99), "the clock does not depend on entropy");
    assert_eq!(clock(NOW_MS + 86_400_000, 1), format!("clock: Date.now {}, new Date 2026-01-02T00:00:00.123Z", NOW_MS + 86_400_000));
}

#[test]
fn performance_now_is_the_virtual_monotonic_clock() {
    if !built() {
        return;
    }
    let perf = |now, entropy| message(&module().reconcile(&hikawa("perf", now, entropy)).unwrap().value);
    // 0 when the call starts, and work does not move it (only a wait would): a function of
    // nothing, so the same in every call.
    assert_eq!(perf(NOW_MS, 1), "perf: performance.now 0..0 (4999950000)");
    assert_eq!(perf(NOW_MS, 1), perf(NOW_MS + 1_000, 2));
}

#[test]
fn math_random_comes_from_the_calls_entropy() {
    if !built() {
        return;
    }
    let random = |now, entropy| message(&module().reconcile(&hikawa("random", now, entropy)).unwrap().value);
    let drawn = random(NOW_MS, 5);
    let values: Vec<f64> = drawn.strip_prefix("random: ").expect(&drawn).split(' ').map(|v| v.parse().expect(v)).collect();
    assert_eq!(values.len(), 3, "{drawn}");
    assert!(values.iter().all(|v| (0.0..1.0).contains(v)), "{drawn}");
    assert!(values[0] != values[1] && values[1] != values[2], "a sequence, not one value: {drawn}");
    assert_eq!(drawn, random(NOW_MS, 5), "the same entropy, the same numbers");
    assert_eq!(drawn, random(NOW_MS + 1_000, 5), "whatever the time");
    assert_ne!(drawn, random(NOW_MS, 6), "another entropy, other numbers");
}

#[test]
fn console_lines_reach_the_log_at_their_level() {
    if !built() {
        return;
    }
    // The component has no stdio: without the kit's routing these lines went nowhere.
    let outcome = module().reconcile(&hikawa("console", NOW_MS, 1)).unwrap();
    assert!(outcome.value.says().next().is_some(), "and then it decides: {:?}", outcome.value);
    let lines: Vec<(String, &str)> = outcome.logs.iter().map(|l| (format!("{:?}", l.level), l.message.as_str())).collect();
    assert_eq!(
        lines,
        [
            ("Level::Info".to_string(), r#"said 1 {"words":["Zun","Doko"],"big":"18446744073709551616n"}"#),
            ("Level::Info".to_string(), "info line"),
            ("Level::Warn".to_string(), "warn line RangeError: out of tune"),
            ("Level::Error".to_string(), "error line"),
            ("Level::Debug".to_string(), "debug line null undefined"),
        ]
    );
}
