//! One WASI module's calls run at most as many at once as the node has cores, so they keep no
//! more pool slots warm than that (an interpreter's slot keeps megabytes of its snapshot
//! mapped), and the turns are the module's own: another module's call never waits on them.
//! See `turns.rs` and `in_flight.rs`. Alone in its test binary, so the pool's counts are this test's.
//!
//! Every bound here is the turns the engine is given (`common::wasi_calls::cores`: the cores, or
//! `ZUNDOKO_TEST_CORES`), and the memory reservation is made roomy enough for every call the
//! tests make at once, so it never stands in for the turns: the tests bite on a node of 1 core
//! or 64 (`ZUNDOKO_TEST_CORES=1` and `=16` on this 2-core machine, and `taskset -c 0`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::wasi_calls::{SlotWatcher, cores, hoard_module, holding};
use zundoko_operator::supply::Tenant;
use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine, SandboxLimits};

/// The memory one call reserves, at most (its 4 MiB cap and what the virtual WASI may hold):
/// checked against the module's own figure in `load`.
const RESERVED_PER_CALL_MIB: usize = 10;

/// An engine whose WASI modules get `cores()` turns, and whose memory reservation admits more
/// calls at once than any test here makes (four per turn, and more): the turns alone bound them.
fn engine() -> (SandboxEngine, usize) {
    let turns = cores();
    let limits = SandboxLimits {
        memory_bytes: 4 << 20,
        max_memory_bytes: (4 * turns + 4) * (RESERVED_PER_CALL_MIB << 20),
        ..SandboxLimits::default()
    };
    (SandboxEngine::new(limits).unwrap().with_calls_per_module(turns), turns)
}

/// The WASI hoard fixture as a module of its own, its calls taking about `spin` loop turns; the
/// reservation is checked to admit more calls than `calls_at_once`.
fn load(engine: &SandboxEngine, fuel: u64, calls_at_once: usize) -> Arc<RulesModule> {
    let module = hoard_module(engine, fuel);
    let admitted = module.limits().max_memory_bytes / module.host_bytes_per_call();
    assert!(admitted > calls_at_once, "the memory reservation admits {admitted} calls at once, fewer than the {calls_at_once} made: it would bound them, not the turns");
    module
}

fn spinning(turns: u64) -> zundoko_rules::Observed {
    holding(1, turns)
}

/// Three calls one after another, as a blocking caller makes them.
fn three_calls(module: &RulesModule, observed: &zundoko_rules::Observed) -> Result<(), GuestError> {
    (0..3).try_for_each(|_| module.reconcile(observed).map(drop))
}

#[test]
fn a_wasi_modules_calls_run_at_most_cores_at_once_and_warm_no_more_slots_than_that() {
    let (engine, turns) = engine();
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    let module = load(&engine, 1_000_000_000, 4 * turns + 2);
    let observed = spinning(5_000_000);
    let watcher = SlotWatcher::start(&pool);
    let calls: Vec<_> = (0..4 * turns + 2)
        .map(|_| {
            let (module, observed) = (module.clone(), observed.clone());
            std::thread::spawn(move || three_calls(&module, &observed))
        })
        .collect();
    for call in calls {
        call.join().unwrap().unwrap();
    }
    let (most_at_once, warm) = (watcher.most_at_once(), pool.unused_warm_memories() as usize);
    eprintln!("{} calls from {} threads, {turns} turns: at most {most_at_once} at once, {warm} slots warm", 3 * (4 * turns + 2), 4 * turns + 2);
    assert!(most_at_once >= 1, "the watcher saw the calls");
    assert!(most_at_once <= turns, "{most_at_once} calls of one module at once with {turns} turns");
    assert!(warm <= turns, "one module's calls left {warm} slots warm, more than the {turns} that ever ran at once");
}

#[test]
fn another_modules_call_does_not_wait_for_a_busy_modules_turns() {
    let (engine, turns) = engine();
    let (busy, other) = (load(&engine, 1_500_000_000, turns + 2), load(&engine, 1_000_000_001, turns + 2));
    // Every turn of the busy module taken, as its long calls would take them (held here, so no
    // call of its ends and gives one back while the other module's call runs).
    let (_, busy_turns) = busy.own_threads().expect("a WASI module has turns");
    let held: Vec<_> = (0..turns).map(|_| futures::executor::block_on(busy_turns.acquire(Tenant::Cluster))).collect();
    // A call of the busy module now waits for a turn...
    let (busy_done, busy_call) = std::sync::mpsc::channel();
    let waiting = {
        let busy = busy.clone();
        std::thread::spawn(move || busy_done.send(busy.reconcile(&spinning(1_000)).map(drop)))
    };
    // ...and a call of the other module does not: it ends (a bound, not a timing: on turns
    // shared by the modules it would wait as long as the busy module's turns are held).
    let (other_done, other_call) = std::sync::mpsc::channel();
    std::thread::spawn(move || other_done.send(other.reconcile(&spinning(1_000)).map(drop)));
    let other_result = other_call.recv_timeout(Duration::from_secs(120)).expect("the other module's call waited for the busy module's turns");
    other_result.unwrap();
    assert!(busy_call.try_recv().is_err(), "the busy module's call ran while every one of its {turns} turns was held");
    drop(held);
    busy_call.recv_timeout(Duration::from_secs(120)).expect("the busy module's call ran once its turns were given back").unwrap();
    waiting.join().unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_and_blocking_callers_share_one_count_of_turns() {
    use zundoko_operator::supply::contract::plan_check::PlanLimits;
    use zundoko_operator::supply::contract::rules::{Rules, decide_async};
    let (engine, turns) = engine();
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    let module = load(&engine, 1_000_000_000, 4 * turns);
    let observed = spinning(5_000_000);
    let watcher = SlotWatcher::start(&pool);
    // Blocking callers (a smoke test, the CLI) on threads of their own, and async callers
    // (reconciles), each as many as twice the turns, at once.
    let (finished, blocking_done) = std::sync::mpsc::channel();
    for _ in 0..2 * turns {
        let (module, observed, finished) = (module.clone(), observed.clone(), finished.clone());
        std::thread::spawn(move || finished.send(three_calls(&module, &observed)));
    }
    let rules: Arc<dyn Rules> = module.clone();
    let decisions: Vec<_> = (0..2 * turns)
        .map(|_| {
            let (rules, observed) = (rules.clone(), Arc::new(observed.clone()));
            tokio::spawn(async move {
                for _ in 0..3 {
                    decide_async(rules.clone(), observed.clone(), PlanLimits::default(), Tenant::Cluster).await.outcome.map(drop)?;
                }
                Ok::<(), GuestError>(())
            })
        })
        .collect();
    // A call that counted twice (its caller's turn and one of its own) would wait forever once
    // every turn is held by such callers: a bound, not a hang.
    let all = async {
        for decision in decisions {
            decision.await.unwrap().unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(300), all).await.expect("the async callers finished: no call waits for a second turn");
    for _ in 0..2 * turns {
        blocking_done.recv_timeout(Duration::from_secs(300)).expect("the blocking callers finished").unwrap();
    }
    let most_at_once = watcher.most_at_once();
    eprintln!("{} calls, half blocking and half async, {turns} turns: at most {most_at_once} at once", 12 * turns);
    assert!(most_at_once >= 1, "the watcher saw the calls");
    assert!(most_at_once <= turns, "{most_at_once} calls of one module at once with {turns} turns: blocking and async callers counted apart");
}

/// Ten busy modules of tenant a and one of tenant b (`supply/shares.rs`): each module called
/// by as many reconciles at once as it has turns, over and over. While b's calls are made,
/// b's one module gets about as many calls as a's ten together, not a tenth of them. Counted
/// in calls made, not time; the memory reservation admits every call at once, so the tenants'
/// share alone bounds them. Seen failing without the tenants' bound: a made about ten calls
/// for each of b's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_with_ten_busy_modules_gets_no_more_calls_than_a_tenant_with_one() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use zundoko_operator::supply::contract::plan_check::PlanLimits;
    use zundoko_operator::supply::contract::rules::{Rules, decide_async};
    let turns = cores();
    let callers = 11 * turns;
    let limits = SandboxLimits { memory_bytes: 4 << 20, max_memory_bytes: (callers + 4) * (RESERVED_PER_CALL_MIB << 20), ..SandboxLimits::default() };
    let engine = SandboxEngine::new(limits).unwrap().with_calls_per_module(turns);
    let (a, b) = (Tenant::Namespace("tenant-a".into()), Tenant::Namespace("tenant-b".into()));
    let mut modules: Vec<(Tenant, Arc<dyn Rules>)> = (0..10).map(|i| (a.clone(), load(&engine, 1_000_000_000 + i, callers) as Arc<dyn Rules>)).collect();
    modules.push((b.clone(), load(&engine, 2_000_000_000, callers)));
    let observed = Arc::new(spinning(1_000_000));
    let (made_by_a, made_by_b, b_done) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    // b's reconciles make eight calls each; a's call until b's are done. b's come first.
    let (mut b_callers, mut a_callers) = (Vec::new(), Vec::new());
    for (tenant, rules) in modules.iter().rev() {
        for _ in 0..turns {
            let (tenant, rules, observed, b_done) = (tenant.clone(), rules.clone(), observed.clone(), b_done.clone());
            let (is_b, made) = if tenant == b { (true, made_by_b.clone()) } else { (false, made_by_a.clone()) };
            let caller = tokio::spawn(async move {
                let mut calls = 0;
                while if is_b { calls < 8 } else { !b_done.load(Ordering::SeqCst) } {
                    decide_async(rules.clone(), observed.clone(), PlanLimits::default(), tenant.clone()).await.outcome.map(drop)?;
                    calls += 1;
                    made.fetch_add(1, Ordering::SeqCst);
                }
                Ok::<_, GuestError>(())
            });
            if is_b { b_callers.push(caller) } else { a_callers.push(caller) }
        }
    }
    for caller in b_callers {
        tokio::time::timeout(Duration::from_secs(300), caller).await.expect("b's calls were made").unwrap().unwrap();
    }
    let (by_a, by_b) = (made_by_a.load(Ordering::SeqCst), made_by_b.load(Ordering::SeqCst));
    b_done.store(true, Ordering::SeqCst);
    for caller in a_callers {
        tokio::time::timeout(Duration::from_secs(300), caller).await.expect("a's calls ended").unwrap().unwrap();
    }
    eprintln!("{turns} turns a module: while b's one module made {by_b} calls, a's ten made {by_a}");
    assert_eq!(by_b, 8 * turns);
    // Without the tenants' share: about ten of a's calls for each of b's.
    assert!(by_a <= 2 * by_b + 2 * turns, "a's ten modules made {by_a} calls while b's one made {by_b}: more than their share");
}
