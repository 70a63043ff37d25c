//! The docs' claim "sixteen concurrent reconciles cannot hold 768 MiB", end to end: sixteen
//! calls at once of a WASI module, each growing its memory by 24 MiB and holding it while it
//! burns CPU, raise the process's peak RSS (VmHWM) by no more than the in-flight ceiling
//! (`--max-memory-mib`, 256 MiB) and some slack; without the reservation in
//! `RulesModule::call_metered` all sixteen hold their memory at once (384 MiB). Alone in its
//! test binary, so no other test's memory is counted.

mod common;

use std::sync::Arc;

use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

fn vm_hwm_mib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<i64>().unwrap() / 1024
}

#[test]
fn sixteen_concurrent_wasi_calls_hold_at_most_the_ceiling() {
    let limits = SandboxLimits::default();
    let ceiling_mib = (limits.max_memory_bytes >> 20) as i64;
    let engine = SandboxEngine::new(limits).unwrap();
    // Fuel for calls long enough (a few hundred ms) that all sixteen would overlap.
    let bytes = zundoko_operator::supply::sandbox::budget::with_section(&common::fixture_bytes("zundoko-wasi-hoard"), br#"{"fuel": 1500000000}"#);
    let module = Arc::new(engine.load(&bytes).unwrap());
    assert!(module.uses_wasi());
    let observed = common::observed_with(&[("hoard", "grow"), ("mib", "24"), ("spin", "30000000")]);
    module.reconcile(&observed).unwrap();
    let before = vm_hwm_mib();
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let (module, observed) = (module.clone(), observed.clone());
            std::thread::spawn(move || module.reconcile(&observed).map(|o| o.peak_memory_bytes))
        })
        .collect();
    for call in calls {
        let peak = call.join().unwrap().unwrap();
        assert!(peak >= 24 << 20, "each call held its 24 MiB: {peak}");
    }
    let grew = vm_hwm_mib() - before;
    eprintln!("sixteen calls at once: peak RSS +{grew} MiB");
    assert!(grew <= ceiling_mib + 32, "sixteen calls at once raised the peak RSS by {grew} MiB, past the {ceiling_mib} MiB ceiling");
}
