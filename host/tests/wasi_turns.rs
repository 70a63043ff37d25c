//! One WASI module's calls run at most as many at once as the node has cores, so they keep no
//! more pool slots warm than that (an interpreter's slot keeps megabytes of its snapshot
//! mapped), and the turns are the module's own: another module's call never waits on them.
//! See `in_flight.rs`. Alone in its test binary, so the pool's counts are this test's.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use zundoko_operator::supply::sandbox::{RulesModule, SandboxEngine, SandboxLimits, budget};

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, usize::from)
}

/// The WASI hoard fixture as a module of its own (a budget section makes other bytes: another
/// digest, another compiled module), its calls taking about `spin` loop turns.
fn load(engine: &SandboxEngine, fuel: u64) -> Arc<RulesModule> {
    let bytes = budget::with_section(&common::fixture_bytes("zundoko-wasi-hoard"), format!(r#"{{"fuel": {fuel}}}"#).as_bytes());
    let module = engine.load(&bytes).unwrap();
    assert!(module.uses_wasi(), "the fixture imports WASI: its calls take turns");
    Arc::new(module)
}

fn spinning(turns: u64) -> zundoko_rules::Observed {
    common::observed_with(&[("hoard", "grow"), ("mib", "1"), ("spin", &turns.to_string())])
}

#[test]
fn a_wasi_modules_calls_run_at_most_cores_at_once_and_warm_no_more_slots_than_that() {
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    let module = load(&engine, 1_000_000_000);
    let observed = spinning(5_000_000);
    let (done, most_at_once) = (Arc::new(AtomicBool::new(false)), Arc::new(std::sync::atomic::AtomicUsize::new(0)));
    let watcher = {
        let (done, most_at_once, pool) = (done.clone(), most_at_once.clone(), pool.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                most_at_once.fetch_max(pool.memories(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let calls: Vec<_> = (0..4 * cores() + 2)
        .map(|_| {
            let (module, observed) = (module.clone(), observed.clone());
            std::thread::spawn(move || (0..3).map(|_| module.reconcile(&observed).map(drop)).collect::<Result<Vec<()>, _>>())
        })
        .collect();
    for call in calls {
        call.join().unwrap().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let (most_at_once, warm) = (most_at_once.load(Ordering::SeqCst), pool.unused_warm_memories() as usize);
    eprintln!("{} calls from {} threads on {} cores: at most {most_at_once} at once, {warm} slots warm", 3 * (4 * cores() + 2), 4 * cores() + 2, cores());
    assert!(most_at_once >= 1, "the watcher saw the calls");
    assert!(most_at_once <= cores(), "{most_at_once} calls of one module at once on {} cores", cores());
    assert!(warm <= cores(), "one module's calls left {warm} slots warm, more than the {} that ever ran at once", cores());
}

#[test]
fn another_modules_call_does_not_wait_for_a_busy_modules_turns() {
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    let (busy, other) = (load(&engine, 1_500_000_000), load(&engine, 1_000_000_001));
    // Long calls of the busy module, more than its turns: some of them wait.
    let busy_calls: Vec<_> = (0..2 * cores())
        .map(|_| {
            let module = busy.clone();
            std::thread::spawn(move || {
                module.reconcile(&spinning(30_000_000)).unwrap();
                Instant::now()
            })
        })
        .collect();
    let waiting = Instant::now();
    while pool.memories() < cores() {
        assert!(waiting.elapsed() < Duration::from_secs(60), "the busy module's calls did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    // A short call of the other module, while every turn of the busy one is taken.
    other.reconcile(&spinning(1_000)).unwrap();
    let other_done = Instant::now();
    let busy_done: Vec<Instant> = busy_calls.into_iter().map(|c| c.join().unwrap()).collect();
    let earliest = busy_done.iter().min().unwrap();
    assert!(other_done < *earliest, "the other module's call waited for the busy module's calls to end");
}
