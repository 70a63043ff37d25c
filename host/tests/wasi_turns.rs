//! One WASI module's calls run at most as many at once as the node has cores, so they keep no
//! more pool slots warm than that (an interpreter's slot keeps megabytes of its snapshot
//! mapped), and the turns are the module's own: another module's call never waits on them.
//! See `turns.rs` and `in_flight.rs`. Alone in its test binary, so the pool's counts are this test's.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use wasmtime::PoolingAllocatorMetrics;
use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine, SandboxLimits, budget};

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

/// Three calls one after another, as a blocking caller makes them.
fn three_calls(module: &RulesModule, observed: &zundoko_rules::Observed) -> Result<(), GuestError> {
    (0..3).try_for_each(|_| module.reconcile(observed).map(drop))
}

/// Samples how many of the pool's memories are in use, every 200 µs, until asked for the most.
struct SlotWatcher {
    done: Arc<AtomicBool>,
    most: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl SlotWatcher {
    fn start(pool: &PoolingAllocatorMetrics) -> Self {
        let (done, most, pool) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), pool.clone());
        let thread = {
            let (done, most) = (done.clone(), most.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    most.fetch_max(pool.memories(), Ordering::SeqCst);
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        };
        SlotWatcher { done, most, thread }
    }

    /// Stops the watcher: the most calls it saw at once.
    fn most_at_once(self) -> usize {
        self.done.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
        self.most.load(Ordering::SeqCst)
    }
}

#[test]
fn a_wasi_modules_calls_run_at_most_cores_at_once_and_warm_no_more_slots_than_that() {
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    let module = load(&engine, 1_000_000_000);
    let observed = spinning(5_000_000);
    let watcher = SlotWatcher::start(&pool);
    let calls: Vec<_> = (0..4 * cores() + 2)
        .map(|_| {
            let (module, observed) = (module.clone(), observed.clone());
            std::thread::spawn(move || three_calls(&module, &observed))
        })
        .collect();
    for call in calls {
        call.join().unwrap().unwrap();
    }
    let (most_at_once, warm) = (watcher.most_at_once(), pool.unused_warm_memories() as usize);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_and_blocking_callers_share_one_count_of_turns() {
    use zundoko_operator::supply::contract::plan_check::PlanLimits;
    use zundoko_operator::supply::contract::rules::{Rules, decide_async};
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    let module = load(&engine, 1_000_000_000);
    let observed = spinning(5_000_000);
    let watcher = SlotWatcher::start(&pool);
    // Blocking callers (a smoke test, the CLI) on threads of their own, and async callers
    // (reconciles), each as many as twice the turns, at once.
    let (finished, blocking_done) = std::sync::mpsc::channel();
    for _ in 0..2 * cores() {
        let (module, observed, finished) = (module.clone(), observed.clone(), finished.clone());
        std::thread::spawn(move || finished.send(three_calls(&module, &observed)));
    }
    let rules: Arc<dyn Rules> = module.clone();
    let decisions: Vec<_> = (0..2 * cores())
        .map(|_| {
            let (rules, observed) = (rules.clone(), Arc::new(observed.clone()));
            tokio::spawn(async move {
                for _ in 0..3 {
                    decide_async(rules.clone(), observed.clone(), PlanLimits::default()).await.outcome.map(drop)?;
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
    for _ in 0..2 * cores() {
        blocking_done.recv_timeout(Duration::from_secs(300)).expect("the blocking callers finished").unwrap();
    }
    let most_at_once = watcher.most_at_once();
    eprintln!("{} calls, half blocking and half async, on {} cores: at most {most_at_once} at once", 12 * cores(), cores());
    assert!(most_at_once >= 1, "the watcher saw the calls");
    assert!(most_at_once <= cores(), "{most_at_once} calls of one module at once on {} cores: blocking and async callers counted apart", cores());
}
