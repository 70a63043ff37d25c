//! The sandbox with the real built components: wasm and native agree, and hostile modules
//! fail with the right typed error while the host carries on.

mod common;

use common::{fixture_bytes, module_bytes};
use sha2::{Digest, Sha256};
use zundoko_operator::supply::contract::rules::{NativeRules, Rules, decide};
use zundoko_operator::supply::sandbox::{GuestError, GuestOutcome, ModuleIdentity, RULES_EXPORT, RulesModule, SandboxEngine, SandboxLimits};
use zundoko_operator::supply::contract::plan_check::{PlanLimits, PlanRejection};
use zundoko_rules::naming::zundoko_name;
use zundoko_rules::song::mix;
use zundoko_rules::{Action, Observed, Plan, Said};

fn engine() -> SandboxEngine {
    SandboxEngine::new(SandboxLimits::default()).unwrap()
}

fn hikawa(params: &[(&str, &str)]) -> Observed {
    common::observed_with(params)
}

#[test]
fn wasm_and_native_plans_are_identical_over_many_seeds() {
    let engine = engine();
    for (module, native) in [
        ("zundoko-classic", zundoko_rules::classic()),
        ("zundoko-strict-ja", zundoko_rules::strict_japanese()),
    ] {
        let wasm = engine.load(&module_bytes(module)).unwrap();
        assert_eq!(wasm.identity().info, native.module_info(), "{module} exports the rules' own metadata");
        assert!(!wasm.uses_wasi(), "{module}: a Rust module imports no WASI");
        let native = NativeRules::new(native);
        let mut compared = 0;
        for seed in 0..150u64 {
            // Walk a whole song, comparing every decision on the way.
            let mut observed = hikawa(if seed % 3 == 0 { &[("zuns", "3")] } else { &[] });
            for step in 0..400u64 {
                observed.entropy = mix(seed << 20 | step);
                let a = wasm.reconcile(&observed).unwrap().value;
                let b = native.reconcile(&observed).unwrap().value;
                assert_eq!(a, b, "{module} seed {seed} step {step}");
                compared += 1;
                observed.apply(&a);
                match a.requeue_after() {
                    Some(ms) => observed.now += ms as i64,
                    None if a.says().next().is_some() => {}
                    None => break,
                }
            }
        }
        assert!(compared > 3000, "{compared}");
        // Errors agree too.
        let bad = hikawa(&[("zuns", "many")]);
        let wasm_error = wasm.reconcile(&bad).unwrap_err();
        let native_error = native.reconcile(&bad).unwrap_err();
        assert_eq!(wasm_error.to_string(), native_error.to_string());
        assert_eq!(wasm_error.reason(), "InvalidParams");
    }
}

#[test]
fn a_thousand_children_cross_the_boundary_intact() {
    let engine = engine();
    let wasm = engine.load(&module_bytes("zundoko-classic")).unwrap();
    let native = NativeRules::new(zundoko_rules::classic());
    let mut observed = hikawa(&[]);
    for index in 1..=1000 {
        observed.zundokos.push(Said { name: zundoko_name("hk", index), index, word: "Doko".into(), said_at: Some(0) });
    }
    let limits = PlanLimits { max_children: 2000, ..PlanLimits::default() };
    let a = decide(&wasm, &observed, &limits);
    let b = decide(&native, &observed, &limits);
    assert_eq!(a.outcome.as_ref().unwrap(), b.outcome.as_ref().unwrap());
    assert_eq!(a.outcome.unwrap().says().next().unwrap().index, 1001);
    assert!(a.fuel_used.unwrap() > 0);
}

#[test]
fn identity_names_the_module_and_its_digest() {
    let bytes = module_bytes("zundoko-strict-ja");
    let module = engine().load(&bytes).unwrap();
    let id = module.identity();
    assert_eq!(id.info.name, "zundoko-strict-ja");
    assert_eq!(id.digest, format!("sha256:{}", hex::encode(Sha256::digest(&bytes))));
    assert_eq!(id.size, bytes.len());
    assert!(bytes.len() < 64 * 1024, "guest is {} bytes", bytes.len());
}

/// Run a hostile request, then prove the same module (and so the host) still serves.
fn hostile(module: &RulesModule, what: &str) -> GuestError {
    let error = decide(module, &hikawa(&[("hostile", what)]), &PlanLimits::default())
        .outcome
        .expect_err(what);
    let after = decide(module, &hikawa(&[]), &PlanLimits::default());
    assert!(after.outcome.is_ok(), "after {what}: {:?}", after.outcome);
    error
}

#[test]
fn hostile_guests_fail_with_typed_errors_and_the_host_carries_on() {
    let engine = engine();
    let module = engine.load(&fixture_bytes("zundoko-hostile")).unwrap();
    let limits = engine.limits().clone();

    let e = hostile(&module, "loop");
    assert!(matches!(e, GuestError::OutOfCpuBudget { budget } if budget == limits.fuel), "{e}");
    assert!(e.to_string().contains("CPU budget"), "{e}");

    let e = hostile(&module, "allocate");
    assert!(matches!(e, GuestError::MemoryCap { limit, requested } if limit == limits.memory_bytes && requested > limit), "{e}");

    let e = hostile(&module, "panic");
    assert_eq!(e.reason(), "GuestTrapped");
    assert!(e.to_string().contains("hostile guest panics on purpose"), "the guest's own message: {e}");

    let e = hostile(&module, "recurse");
    assert!(
        matches!(e, GuestError::StackOverflow) || matches!(&e, GuestError::Trap { trap, .. } if trap.contains("out of bounds")),
        "{e:?}"
    );

    // A million actions: within the default limits the guest cannot even build it ...
    let e = hostile(&module, "huge-plan");
    assert!(matches!(e, GuestError::OutOfCpuBudget { .. } | GuestError::MemoryCap { .. }), "{e}");
    // ... and with room to build it, the plan check refuses it whole.
    let roomy = SandboxEngine::new(SandboxLimits { memory_bytes: 512 << 20, fuel: 2_000_000_000, ..SandboxLimits::default() }).unwrap();
    let big = roomy.load(&fixture_bytes("zundoko-hostile")).unwrap();
    let e = hostile(&big, "huge-plan");
    assert!(matches!(e, GuestError::InvalidPlan(PlanRejection::TooManyActions { actions: 1_000_000, .. })), "{e}");

    let e = hostile(&module, "foreign-namespace");
    assert!(matches!(&e, GuestError::InvalidPlan(PlanRejection::ForeignNamespace { found, .. }) if found == "kube-system"), "{e}");
    let e = hostile(&module, "foreign-name");
    assert!(matches!(&e, GuestError::InvalidPlan(PlanRejection::ForeignName { found, .. }) if found == "someone-else-zundoko-001"), "{e}");

    // A flood of log lines is cut to the limit; the decision itself stands.
    let flood = module.reconcile(&hikawa(&[("hostile", "log-flood")])).unwrap();
    assert_eq!(flood.logs.len(), limits.max_log_lines);
}

#[test]
fn quick_calls_fit_the_inline_slice_and_longer_ones_get_the_whole_budget() {
    // The default rules fit the slice at 5 and at 1,000 children: decided without a handoff.
    let module = engine().load(&module_bytes("zundoko-classic")).unwrap();
    let mut observed = hikawa(&[]);
    let quick = module.reconcile_quick(&observed).expect("a quick call").unwrap();
    assert_eq!(quick.value, module.reconcile(&observed).unwrap().value, "the same plan either way");
    observed.zundokos = (1..=1000)
        .map(|i| Said { name: zundoko_name("hk", i), index: i, word: if i % 2 == 0 { "Zun" } else { "Doko" }.into(), said_at: Some(i as i64) })
        .collect();
    assert!(matches!(module.reconcile_quick(&observed), Some(Ok(_))), "1,000 children fit the slice too");
    // A call that needs more than the slice: not decided quickly, and then decided whole.
    let tight = SandboxEngine::new(SandboxLimits { inline_fuel: 1_000, ..SandboxLimits::default() }).unwrap();
    let module = tight.load(&module_bytes("zundoko-classic")).unwrap();
    assert!(module.reconcile_quick(&hikawa(&[])).is_none());
    let decision = decide(&module, &hikawa(&[]), &PlanLimits::default());
    assert!(decision.outcome.is_ok() && decision.fuel_used.unwrap() > 1_000, "{decision:?}");
    // A guest that loops: out of the slice quickly, then out of the whole budget, named as such.
    let hostile = engine().load(&fixture_bytes("zundoko-hostile")).unwrap();
    let looping = hikawa(&[("hostile", "loop")]);
    assert!(hostile.reconcile_quick(&looping).is_none());
    match hostile.reconcile(&looping) {
        Err(GuestError::OutOfCpuBudget { budget }) => assert_eq!(budget, SandboxLimits::default().fuel),
        other => panic!("{other:?}"),
    }
    // Native rules are always quick.
    assert!(NativeRules::new(zundoko_rules::classic()).reconcile_quick(&hikawa(&[])).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decide_async_decides_quick_and_slow_calls_alike() {
    use std::sync::Arc;
    let limits = PlanLimits::default();
    let observed = Arc::new(hikawa(&[]));
    let quick: Arc<dyn Rules> = Arc::new(engine().load(&module_bytes("zundoko-classic")).unwrap());
    let tight = SandboxEngine::new(SandboxLimits { inline_fuel: 1_000, ..SandboxLimits::default() }).unwrap();
    let slow: Arc<dyn Rules> = Arc::new(tight.load(&module_bytes("zundoko-classic")).unwrap());
    let a = zundoko_operator::supply::contract::rules::decide_async(quick, observed.clone(), limits.clone(), zundoko_operator::supply::Tenant::Cluster).await;
    let b = zundoko_operator::supply::contract::rules::decide_async(slow, observed, limits, zundoko_operator::supply::Tenant::Cluster).await;
    assert_eq!(a.outcome.unwrap(), b.outcome.unwrap());
}

/// A module whose tries are timed around the real module's own calls.
struct TimedTries {
    inner: RulesModule,
    quick: std::sync::Mutex<Vec<(std::time::Duration, bool)>>,
    whole: std::sync::Mutex<Vec<std::time::Duration>>,
}

impl Rules for TimedTries {
    fn identity(&self) -> &std::sync::Arc<ModuleIdentity> {
        self.inner.identity()
    }

    fn reconcile(&self, observed: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
        let started = std::time::Instant::now();
        let outcome = self.inner.reconcile(observed);
        self.whole.lock().unwrap().push(started.elapsed());
        outcome
    }

    fn reconcile_quick(&self, observed: &Observed) -> Option<Result<GuestOutcome<Plan>, GuestError>> {
        let started = std::time::Instant::now();
        let outcome = self.inner.reconcile_quick(observed);
        self.quick.lock().unwrap().push((started.elapsed(), outcome.is_some()));
        outcome
    }
}

/// A call out of its quick slice is made again off the async workers: its time (the tenant's
/// callMillis and the call duration metric, both `Decision::elapsed`) is both tries', and it is
/// one call; never more than the whole call took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_made_again_off_the_async_workers_counts_the_time_of_both_tries() {
    use std::sync::Arc;
    // zundoko-burn needs ~2.6M fuel a call: more than the default quick slice (2M).
    let burn = engine().load(&fixture_bytes("zundoko-burn")).unwrap();
    let timed = Arc::new(TimedTries { inner: burn, quick: Default::default(), whole: Default::default() });
    let rules: Arc<dyn Rules> = timed.clone();
    let started = std::time::Instant::now();
    let decision = zundoko_operator::supply::contract::rules::decide_async(rules, Arc::new(hikawa(&[])), PlanLimits::default(), zundoko_operator::supply::Tenant::Cluster).await;
    let around = started.elapsed();
    assert!(decision.outcome.is_ok(), "{decision:?}");
    let (quick, whole) = (timed.quick.lock().unwrap().clone(), timed.whole.lock().unwrap().clone());
    assert!(matches!(quick[..], [(_, false)]) && whole.len() == 1, "one quick try out of its slice, then one whole: {quick:?} {whole:?}");
    let both = quick[0].0 + whole[0];
    assert!(decision.elapsed >= both, "counted {:?}, the tries took {:?} + {:?}", decision.elapsed, quick[0].0, whole[0]);
    assert!(decision.elapsed <= around, "counted {:?}, more than the whole call took ({around:?})", decision.elapsed);
}

#[test]
fn a_trapped_call_leaves_other_concurrent_calls_alone() {
    let engine = engine();
    let module = std::sync::Arc::new(engine.load(&fixture_bytes("zundoko-hostile")).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let module = module.clone();
            std::thread::spawn(move || {
                let params: &[(&str, &str)] = if i % 2 == 0 { &[("hostile", "panic")] } else { &[] };
                module.reconcile(&hikawa(params)).is_ok()
            })
        })
        .collect();
    let ok: Vec<bool> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(ok, [false, true, false, true, false, true, false, true]);
}

fn load_err(bytes: &[u8]) -> GuestError {
    engine().load(bytes).err().expect("the module is refused")
}

#[test]
fn modules_that_are_not_rules_components_are_refused_with_reasons() {
    assert!(matches!(load_err(&[]), GuestError::EmptyModule));

    let e = load_err(b"#!/bin/sh\necho not wasm\n");
    assert!(matches!(&e, GuestError::NotAComponent(m) if m.contains("magic")), "{e}");

    let mut noise = vec![0u8; 4096];
    let mut x = 1u64;
    for b in noise.iter_mut() {
        x = mix(x);
        *b = x as u8;
    }
    assert_eq!(load_err(&noise).reason(), "NotAComponent");

    let core = wat::parse_str("(module (func (export \"reconcile\")))").unwrap();
    let e = load_err(&core);
    assert!(matches!(&e, GuestError::NotAComponent(m) if m.contains("core wasm module")), "{e}");

    let good = module_bytes("zundoko-classic");
    let e = load_err(&good[..good.len() / 2]);
    assert_eq!(e.reason(), "NotAComponent", "a truncated module: {e}");

    let other_world = wat::parse_str(
        r#"(component
             (core module $m (func (export "f")))
             (core instance $i (instantiate $m))
             (func (export "hello") (canon lift (core func $i "f"))))"#,
    )
    .unwrap();
    let e = load_err(&other_world);
    assert!(
        matches!(&e, GuestError::WorldMismatch { expected, found } if expected == RULES_EXPORT && found == "hello"),
        "{e}"
    );
    assert!(e.to_string().contains(RULES_EXPORT) && e.to_string().contains("hello"), "{e}");

    let rules_export = |name: &str, import: &str| {
        wat::parse_str(format!(
            r#"(component
                 {import}
                 (core module $m (func (export "f")))
                 (core instance $i (instantiate $m))
                 (func $f (canon lift (core func $i "f")))
                 (instance $rules (export "info" (func $f)))
                 (export "{name}" (instance $rules)))"#
        ))
        .unwrap()
    };
    let e = load_err(&rules_export("zundokokiyoshi:rules/rules@0.2.0", ""));
    assert!(matches!(&e, GuestError::WorldMismatch { found, .. } if found.contains("rules@0.2.0")), "{e}");

    let e = load_err(&rules_export(RULES_EXPORT, ""));
    assert!(matches!(&e, GuestError::WorldMismatch { found, .. } if found.contains("types differ")), "same name, wrong types: {e}");

    // WASI outside the virtual WASI's list, or of another version, is refused by name.
    let e = load_err(&rules_export(RULES_EXPORT, r#"(import "wasi:http/outgoing-handler@0.2.0" (instance))"#));
    assert!(matches!(&e, GuestError::ForbiddenImport(i) if i.starts_with("wasi:http/outgoing-handler@0.2.0: not an interface")), "{e}");
    let e = load_err(&rules_export(RULES_EXPORT, r#"(import "wasi:io/poll@0.3.0" (instance))"#));
    assert!(matches!(&e, GuestError::ForbiddenImport(i) if i.contains("version 0.3.0")), "{e}");
    let e = load_err(&rules_export(RULES_EXPORT, r#"(import "acme:net/sockets" (instance))"#));
    assert!(matches!(&e, GuestError::ForbiddenImport(i) if i == "acme:net/sockets"), "{e}");
    // WASI 0.2 interfaces a language runtime imports pass the import check (this one then
    // fails on its export's types, as every module above does).
    let e = load_err(&rules_export(
        RULES_EXPORT,
        r#"(import "wasi:cli/environment@0.2.0" (instance (export "get-arguments" (func (result (list string))))))"#,
    ));
    assert!(matches!(&e, GuestError::WorldMismatch { found, .. } if found.contains("types differ")), "{e}");
}

#[test]
fn each_call_starts_from_a_fresh_instance() {
    // The guest counts its calls in a static (its linear memory) and answers with the count:
    // 1 every time, unless memory outlived a call. A trap in between changes nothing.
    let engine = engine();
    let module = engine.load(&fixture_bytes("zundoko-hostile")).unwrap();
    let count = || module.reconcile(&hikawa(&[("hostile", "count")])).unwrap().value;
    let first = Plan { actions: vec![Action::RequeueAfter(1)] };
    for call in 0..50 {
        assert_eq!(count(), first, "call {call}: the guest's memory outlived a call");
        if call % 10 == 9 {
            assert!(module.reconcile(&hikawa(&[("hostile", "panic")])).is_err());
        }
    }
}

#[test]
fn a_wasi_guest_waiting_an_hour_sees_both_clocks_move_by_the_hour_at_once_and_takes_no_time() {
    // The hoard fixture blocks on a monotonic pollable of an hour, then reports the monotonic
    // clock and the wall clock before and after: the virtual WASI moves both by the hour when
    // the guest waits (a call is a function of its input: no real time passes), and the thread
    // does not wait (an hour, or any part of one a loaded machine's call would not explain).
    let module = engine().load(&fixture_bytes("zundoko-wasi-hoard")).unwrap();
    assert!(module.uses_wasi());
    let now_ms: i64 = 1_767_225_600_123;
    let observed = Observed { now: now_ms, ..hikawa(&[("hoard", "sleep")]) };
    let started = std::time::Instant::now();
    let slept = module.reconcile(&observed).unwrap_or_else(|e| panic!("an hour's wait is not an error: {e}"));
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "slept for real: {took:?}");
    let (seconds, hour_ns) = (now_ms / 1000, 3_600_000_000_000u64);
    assert_eq!(common::status_message(&slept.value), format!("slept: monotonic {hour_ns} ns, wall {seconds}s -> {}s", seconds + 3600), "both clocks moved by the hour, from the call's now and from zero");
    assert!(slept.value.says().next().is_some(), "and then it decides: {:?}", slept.value);
}
