//! The docs' claim "sixteen concurrent reconciles cannot hold 768 MiB", end to end: sixteen
//! calls at once, each of a WASI module of its own (a module's own calls also take turns, at
//! most one per core: sixteen calls of one module would never all run at once on a small
//! machine), each growing its memory by 24 MiB and holding it while it burns CPU. The memory
//! reservation in `RulesModule::call_metered` lets no more of them run at once than its ceiling
//! (`--max-memory-mib`, 256 MiB) holds of what each reserves: the pool's memories in use never
//! exceed that count, and the process's peak RSS (VmHWM) grows by no more than the ceiling and
//! some slack. Without the reservation all sixteen run at once and hold 384 MiB. Alone in its
//! test binary, so no other test's memory or pool slot is counted.

mod common;

use std::sync::Arc;

use common::wasi_calls::{SlotWatcher, hoard_module, holding};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

fn vm_hwm_mib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<i64>().unwrap() / 1024
}

#[test]
fn sixteen_concurrent_wasi_calls_hold_at_most_the_ceiling() {
    let limits = SandboxLimits::default();
    let ceiling = limits.max_memory_bytes;
    let engine = SandboxEngine::new(limits)
        .unwrap()
        .with_compiled_cache(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache"))
        .unwrap();
    // Its sixteen writes collect the cache the suite shares: at the suite's bound, not the default.
    engine.compiled_cache().expect("a cache was given").disk().set_max_bytes(common::compile_once::SUITE_CACHE_BYTES);
    let pool = engine.engine().pooling_allocator_metrics().expect("a pooling engine");
    // Sixteen modules (other fuel, other bytes), with fuel for calls long enough (a few hundred
    // ms) that all sixteen would overlap.
    let modules: Vec<_> = (0..16).map(|n| hoard_module(&engine, 1_500_000_000 + n)).collect();
    let admitted = ceiling / modules[0].host_bytes_per_call();
    assert!((1..16).contains(&admitted), "the ceiling admits {admitted} of the sixteen calls at once: the test would not bite");
    let observed = holding(24, 30_000_000);
    for module in &modules {
        module.reconcile(&observed).unwrap();
    }
    let before = vm_hwm_mib();
    let watcher = SlotWatcher::start(&pool);
    let calls: Vec<_> = modules
        .iter()
        .map(|module| {
            let (module, observed) = (Arc::clone(module), observed.clone());
            std::thread::spawn(move || module.reconcile(&observed).map(|o| o.peak_memory_bytes))
        })
        .collect();
    for call in calls {
        let peak = call.join().unwrap().unwrap();
        assert!(peak >= 24 << 20, "each call held its 24 MiB: {peak}");
    }
    let most_at_once = watcher.most_at_once();
    let grew = vm_hwm_mib() - before;
    eprintln!("sixteen calls of sixteen modules at once: at most {most_at_once} at once ({admitted} admitted), peak RSS +{grew} MiB");
    assert!(most_at_once >= 1, "the watcher saw the calls");
    assert!(most_at_once <= admitted, "{most_at_once} calls held their memory at once; the {} MiB ceiling admits {admitted}", ceiling >> 20);
    let ceiling_mib = (ceiling >> 20) as i64;
    assert!(grew <= ceiling_mib + 32, "sixteen calls at once raised the peak RSS by {grew} MiB, past the {ceiling_mib} MiB ceiling");
}
