//! Calls of a WASI module at once, for the tests of its turns and of the memory reservation
//! (wasi_turns.rs, wasi_reservation.rs): how many turns a module gets, the hoard fixture as a
//! module of its own, and a watcher of the pool's memories in use.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::PoolingAllocatorMetrics;
use zundoko_operator::supply::sandbox::{RulesModule, SandboxEngine, budget};

/// The turns a WASI module gets in these tests: the node's cores, as the operator counts them,
/// or `ZUNDOKO_TEST_CORES` (so the tests can be run as on a node of 1 or 16 cores, whatever
/// this machine has; `taskset -c 0` makes the default 1).
pub fn cores() -> usize {
    match std::env::var("ZUNDOKO_TEST_CORES") {
        Ok(cores) => cores.parse().unwrap_or_else(|e| panic!("ZUNDOKO_TEST_CORES={cores:?}: {e}")),
        Err(_) => std::thread::available_parallelism().map_or(2, usize::from),
    }
}

/// The WASI hoard fixture as a module of its own (a budget section makes other bytes: another
/// digest, another compiled module), with `fuel`.
pub fn hoard_module(engine: &SandboxEngine, fuel: u64) -> Arc<RulesModule> {
    let bytes = budget::with_section(&super::fixture_bytes("zundoko-wasi-hoard"), format!(r#"{{"fuel": {fuel}}}"#).as_bytes());
    let module = engine.load(&bytes).unwrap();
    assert!(module.uses_wasi(), "the fixture imports WASI: its calls take turns and reserve memory");
    Arc::new(module)
}

/// A call that grows its memory by `mib` MiB, writes it all and holds it for `spin` loop turns.
pub fn holding(mib: u32, spin: u64) -> zundoko_rules::Observed {
    super::observed_with(&[("hoard", "grow"), ("mib", &mib.to_string()), ("spin", &spin.to_string())])
}

/// Samples how many of the pool's memories are in use, every 200 µs, until asked for the most.
pub struct SlotWatcher {
    done: Arc<AtomicBool>,
    most: Arc<AtomicUsize>,
    thread: std::thread::JoinHandle<()>,
}

impl SlotWatcher {
    pub fn start(pool: &PoolingAllocatorMetrics) -> Self {
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
    pub fn most_at_once(self) -> usize {
        self.done.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
        self.most.load(Ordering::SeqCst)
    }
}
