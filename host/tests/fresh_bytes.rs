//! A fresh instance per call, byte for byte: a leftover anywhere a call can see fails, not only
//! in the few places fresh.rs's fixtures count.
//!
//! The fixture `zundoko-fresh-bytes` (guest/fixtures/src/fresh_bytes.rs) hashes, at the start of
//! every call, its whole linear memory, 16 MiB it grows (which must read as zeros), its stack
//! pointer and its table (through calls by pointer), and says so; then it dirties hundreds of
//! runs of pages as its `pattern` param asks (every pattern more than `PAGEMAP_SCAN`'s 32 runs
//! at a time, so the scan resumes; a slot's pages reset in place stay resident, so its scans
//! find more and more of them until the pool's 4 MiB `linear_memory_keep_resident` is spent
//! mid-scan and the rest is decommitted, at most calls; the last patterns spend it alone), writes over its
//! image's data, its zeroed statics, its heap and its stack, and some patterns trap deep in the
//! stack. Thousands of calls of twelve patterns on four threads, through a pool so small its
//! slots are reused at nearly every call, must each see exactly what the first call of its
//! pattern saw. The same for a Python fixture (`zundoko-py-fresh-bytes`), with what Python code
//! can see of its interpreter.

mod common;

use std::collections::HashMap;
use std::sync::Mutex;

use common::compile_once::LoadOnce as _;
use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine, SandboxLimits};

/// Patterns 0-11; those with N % 4 == 3 trap after their mess (they see, but cannot say).
const PATTERNS: u64 = 12;
const THREADS: u64 = 4;
const CALLS_PER_THREAD: u64 = 500;
/// The operator's `linear_memory_keep_resident` with `PAGEMAP_SCAN` (supply/sandbox/module.rs).
const KEEP_RESIDENT_KIB: u64 = 4 << 10;

fn traps(pattern: u64) -> bool {
    pattern % 4 == 3
}

/// What a call of `pattern` saw at its start, and what it wrote then: (`seen ...`, runs, KiB).
fn call(module: &RulesModule, pattern: u64) -> Result<(String, u64, u64), String> {
    let observed = common::observed_with(&[("pattern", &format!("{pattern:02}"))]);
    let outcome = match module.reconcile(&observed) {
        Ok(outcome) => outcome,
        Err(GuestError::Trap { .. }) if traps(pattern) => return Ok((String::new(), 0, 0)),
        Err(e) => return Err(format!("pattern {pattern}: {e}")),
    };
    let message = common::status_message(&outcome.value);
    let pages: Vec<&str> = outcome.logs.iter().map(|l| l.message.as_str()).collect();
    let (seen, wrote) = message
        .split_once("; wrote ")
        .ok_or_else(|| format!("pattern {pattern}: {message}"))?;
    let (runs, kib) = wrote
        .trim_end_matches(" KiB")
        .split_once(" runs, ")
        .ok_or_else(|| format!("pattern {pattern}: {message}"))?;
    let number = |s: &str| {
        s.parse::<u64>()
            .map_err(|e| format!("pattern {pattern}: {s:?} in {message}: {e}"))
    };
    Ok((
        format!("{seen} ({})", pages.join(" | ")),
        number(runs)?,
        number(kib)?,
    ))
}

#[test]
fn every_call_sees_exactly_the_module_as_built_through_reused_pool_slots() {
    eprintln!(
        "PAGEMAP_SCAN available: {}",
        wasmtime::PoolingAllocationConfig::is_pagemap_scan_available()
    );
    // Twelve core instances: the fixture's component has three, so at most four calls at once,
    // one per thread; the slots' memories are reused at nearly every call.
    let engine = SandboxEngine::new(SandboxLimits {
        max_concurrent_calls: 12,
        ..SandboxLimits::default()
    })
    .unwrap();
    let module = engine
        .load(&common::fixture_bytes("zundoko-fresh-bytes"))
        .unwrap();

    // The first call of every pattern, one after another: what each must see from now on.
    let mut first = HashMap::new();
    let mut most_kib = 0;
    for pattern in 0..PATTERNS {
        let (seen, runs, kib) = call(&module, pattern).unwrap();
        if traps(pattern) {
            continue;
        }
        assert!(
            seen.contains(" grown zero "),
            "pattern {pattern}'s first call: the memory it grew is not zeros: {seen}"
        );
        assert!(
            runs > 3 * 32,
            "pattern {pattern} writes {runs} runs: more than a scan's 32 at a time, many times over"
        );
        eprintln!("pattern {pattern}: {runs} runs, {kib} KiB");
        most_kib = most_kib.max(kib);
        first.insert(pattern, seen);
    }
    assert!(
        most_kib > KEEP_RESIDENT_KIB,
        "a pattern writes more than the keep-resident budget even in a slot it finds empty: {most_kib} KiB"
    );

    // Then thousands, on four threads, the patterns interleaved, every slot reused.
    let started = std::time::Instant::now();
    let differing = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (module, first, differing) = (&module, &first, &differing);
            scope.spawn(move || {
                for n in 0..CALLS_PER_THREAD {
                    let pattern = (n * 7 + thread * 5 + n / PATTERNS) % PATTERNS;
                    let (seen, _, _) = call(module, pattern).unwrap();
                    if !traps(pattern) && seen != first[&pattern] {
                        differing.lock().unwrap().push(format!("thread {thread} call {n}, pattern {pattern}:\n  first {}\n  now   {seen}", first[&pattern]));
                    }
                }
            });
        }
    });
    let differing = differing.into_inner().unwrap();
    eprintln!(
        "{} calls on {THREADS} threads in {:?}",
        THREADS * CALLS_PER_THREAD,
        started.elapsed()
    );
    assert!(
        differing.is_empty(),
        "{} of {} calls saw what an earlier call left; the first three:\n{}",
        differing.len(),
        THREADS * CALLS_PER_THREAD,
        differing
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The Python fixture (`zundoko-py-fresh-bytes`, guest/fixtures-py/fresh-bytes, `make
/// fixtures-langs`): what a call sees of the interpreter (allocated blocks, where new objects
/// go, the collector, `sys.modules`, `builtins`, its module and class, `json.dumps`, `re`'s
/// cache, the recursion limit) is what its pattern's first call saw, through calls on four
/// threads that leave megabytes and names behind, or raise.
#[test]
fn every_python_call_sees_the_interpreter_as_built() {
    const PY_PATTERNS: u64 = 8;
    const PY_CALLS_PER_THREAD: u64 = 150;
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/fixtures/zundoko-py-fresh-bytes.wasm");
    if !path.exists() {
        common::ci::cannot_run(&format!("{} is missing: build it with `make fixtures-langs` (needs python3 with venv)", path.display()));
        return;
    }
    // Forty core instances: a CPython component has more than eight, so a few calls at once.
    let engine = SandboxEngine::new(SandboxLimits { max_concurrent_calls: 40, ..SandboxLimits::default() })
        .unwrap()
        .with_compiled_cache(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache"))
        .unwrap();
    let module = engine.load_once(&std::fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("the Python fixture loads: {e}"));
    let py_call = |pattern: u64| -> Option<String> {
        let observed = common::observed_with(&[("pattern", &format!("{pattern:02}"))]);
        match module.reconcile(&observed) {
            Ok(outcome) => {
                let message = common::status_message(&outcome.value);
                Some(message.split_once("; wrote ").unwrap_or_else(|| panic!("pattern {pattern}: {message}")).0.to_string())
            }
            Err(GuestError::Trap { .. }) if traps(pattern) => None,
            Err(e) => panic!("pattern {pattern}: {e}"),
        }
    };
    let first: HashMap<u64, String> = (0..PY_PATTERNS).filter_map(|p| py_call(p).map(|seen| (p, seen))).collect();
    assert_eq!(first.len() as u64, PY_PATTERNS - PY_PATTERNS / 4, "every pattern but those that raise says what it saw");
    let differing = Mutex::new(Vec::new());
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let (py_call, first, differing) = (&py_call, &first, &differing);
            scope.spawn(move || {
                for n in 0..PY_CALLS_PER_THREAD {
                    let pattern = (n * 5 + thread * 3 + n / PY_PATTERNS) % PY_PATTERNS;
                    if let Some(seen) = py_call(pattern)
                        && seen != first[&pattern]
                    {
                        differing.lock().unwrap().push(format!("thread {thread} call {n}, pattern {pattern}: first {}, now {seen}", first[&pattern]));
                    }
                }
            });
        }
    });
    let differing = differing.into_inner().unwrap();
    eprintln!("{} Python calls on {THREADS} threads in {:?}", THREADS * PY_CALLS_PER_THREAD, started.elapsed());
    assert!(differing.is_empty(), "{} Python calls saw what an earlier call left; the first three:\n{}", differing.len(), differing.iter().take(3).cloned().collect::<Vec<_>>().join("\n"));
}
