//! Rules in Rust, Python and JavaScript side by side: the classic rules built in each
//! language (`make guest guest-langs`), and for each, in one run:
//!
//! - the module's size and the budget it carries;
//! - a cold compile in the operator's process, and in the compiler process the operator uses
//!   for big modules (its time and peak RSS, from wait4: what the Pod's memory limit must hold);
//! - start to serving with a warm compiled-module cache (load: map the code, check the world,
//!   `info`, the smoke test's first call);
//! - per call, a fresh instance plus `reconcile`, at 5 and 100 children: median time, the
//!   process's mean CPU (user + system: the page faults a fresh instance takes are system
//!   time), fuel, the guest's peak linear memory, the ratio to Rust, and then how many pool
//!   slots stand idle and what they keep resident (the pool's RSS between calls).
//!
//! `ZUNDOKO_BENCH_CALLS_ONLY=1` skips the compiles and warm starts (the code comes from a cache
//! kept in target/tmp/ across runs): for A/B runs of the per-call figures and for profiling
//! (`perf record -g`); `ZUNDOKO_BENCH_CALLS=N` makes N calls per size in Python and JavaScript
//! (default 50).
//!
//! Words/s of 1,000 Hikawas and the operator's RSS while 100 sing, per language, are
//! `make bench-scale` runs (`ZUNDOKO_BENCH_LATENCIES=0 ZUNDOKO_BENCH_RUNS=ceiling,wasm,python,js`). Prints figures;
//! asserts nothing about time. `make bench-languages`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zundoko_operator::supply::contract::rules::smoke_test;
use zundoko_operator::supply::sandbox::{RulesModule, SandboxEngine, SandboxLimits};
use zundoko_operator::supply::contract::plan_check::PlanLimits;
use zundoko_rules::Observed;

mod common;
use common::observed;


/// CPU time of this process so far, user and system (page faults are system time).
fn process_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let time = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

/// Compile in the operator's compiler process (`compile-module`), as `run` does for big
/// modules: its wall time and peak RSS.
fn compile_in_child(bytes: &[u8], limits: &SandboxLimits) -> (Duration, u64, bool) {
    use std::io::Write as _;
    let started = Instant::now();
    #[allow(clippy::zombie_processes)] // reaped by wait4 below, which also gives its rusage
    let mut child = Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .args(["compile-module", "--max-compile-mib", "2048"])
        .arg("--limits-json")
        .arg(serde_json::to_string(limits).unwrap())
        .stdin(Stdio::piped())
        // The code comes back on stdout (the operator keeps it; here only the cost counts).
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the operator binary");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let mut status = 0;
    // SAFETY: wait4 on our own child with valid pointers; it is reaped here, not by `child`.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    (started.elapsed(), usage.ru_maxrss as u64 / 1024, status == 0)
}

struct Language {
    name: &'static str,
    file: &'static str,
}

const LANGUAGES: [Language; 3] = [
    Language { name: "Rust", file: "zundoko-classic.wasm" },
    Language { name: "Python", file: "zundoko-classic-py.wasm" },
    Language { name: "JavaScript", file: "zundoko-classic-js.wasm" },
];

fn main() {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/modules");
    let scratch = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/tmp/bench-languages-{}", std::process::id()));
    let limits = SandboxLimits::default();
    let plan_limits = PlanLimits::default();
    let calls_only = std::env::var("ZUNDOKO_BENCH_CALLS_ONLY").is_ok_and(|v| v == "1");
    let kept_cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp/bench-languages-cache");
    let interpreter_calls: u32 = std::env::var("ZUNDOKO_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    println!("classic rules in three languages (release, this machine; medians)");
    println!();
    println!(
        "{:<10} | {:>10} | {:>22} | {:>12} | {:>19} | {:>10}",
        "language", "bytes", "budget (fuel, memory)", "compile", "child compile, RSS", "warm start"
    );
    println!("{:-<10}-+-{:->10}-+-{:->22}-+-{:->12}-+-{:->19}-+-{:->10}", "", "", "", "", "", "");
    let mut served: Vec<(&str, RulesModule, SandboxEngine)> = Vec::new();
    for language in &LANGUAGES {
        let path: PathBuf = modules.join(language.file);
        let Ok(bytes) = std::fs::read(&path) else {
            println!("{:<10} | SKIPPED: {} is missing (make guest-langs needs componentize-py and node)", language.name, path.display());
            continue;
        };
        if calls_only {
            // The code from a cache kept across runs: only the calls are measured.
            let engine = SandboxEngine::new(limits.clone()).unwrap().with_compiled_cache(&kept_cache).unwrap();
            let module = engine.load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", language.name));
            println!("{:<10} | {:>10} | (loaded from {})", language.name, bytes.len(), kept_cache.display());
            served.push((language.name, module, engine));
            continue;
        }
        // Cold, in this process.
        let cold = SandboxEngine::new(limits.clone()).unwrap();
        let started = Instant::now();
        let module = cold.load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", language.name));
        let compile = started.elapsed();
        // In the compiler process, into a cache; then warm starts from it.
        let dir = scratch.join(language.name);
        let (child, child_rss_mib, ok) = compile_in_child(&bytes, &limits);
        assert!(ok, "{}: the compiler process failed", language.name);
        let warm: Vec<Duration> = (0..5)
            .map(|_| {
                let engine = SandboxEngine::new(limits.clone()).unwrap().with_compiled_cache(&dir).unwrap();
                let started = Instant::now();
                let module = engine.load(&bytes).unwrap();
                smoke_test(&module, &plan_limits).unwrap();
                started.elapsed()
            })
            .collect();
        let granted = module.limits();
        println!(
            "{:<10} | {:>10} | {:>22} | {:>9} ms | {:>6} ms, {:>4} MiB | {:>7} ms",
            language.name,
            bytes.len(),
            format!("{}M, {} MiB", granted.fuel / 1_000_000, granted.memory_bytes >> 20),
            ms(compile),
            ms(child),
            child_rss_mib,
            ms(median(warm))
        );
        served.push((language.name, module, cold));
    }
    println!();
    println!("per call: a fresh instance + reconcile (median time; mean CPU of the process, user + system, page faults");
    println!("included; fuel; the guest's peak linear memory); then the pool's idle slots and what they keep resident");
    println!();
    println!(
        "{:<10} | {:>8} | {:>10} | {:>9} | {:>12} | {:>10} | {:>11} | {:>15}",
        "language", "children", "time (us)", "CPU (us)", "fuel", "memory MiB", "x Rust time", "idle slots, MiB"
    );
    println!("{:-<10}-+-{:->8}-+-{:->10}-+-{:->9}-+-{:->12}-+-{:->10}-+-{:->11}-+-{:->15}", "", "", "", "", "", "", "", "");
    let mut rust_time = std::collections::HashMap::new();
    for (name, module, engine) in &served {
        for children in [5u32, 100] {
            // At the start of 2026, so a Python module's time.time() reads a date.
            let input = Observed { now: 1_767_225_600_000, ..observed(children) };
            let first = module.reconcile(&input).unwrap();
            let calls: u32 = if *name == "Rust" { 2_000 } else { interpreter_calls };
            let cpu_before = process_cpu();
            let times: Vec<Duration> = (0..calls)
                .map(|_| {
                    let started = Instant::now();
                    std::hint::black_box(module.reconcile(std::hint::black_box(&input)).unwrap());
                    started.elapsed()
                })
                .collect();
            let cpu = (process_cpu() - cpu_before) / calls;
            let time = median(times);
            let pool = engine.engine().pooling_allocator_metrics().expect("the pooling allocator");
            let idle = format!("{}, {:.1}", pool.unused_warm_memories(), pool.unused_memory_bytes_resident() as f64 / (1 << 20) as f64);
            if *name == "Rust" {
                rust_time.insert(children, time);
            }
            let ratio = rust_time.get(&children).map_or("-".into(), |rust| format!("{:.0}", time.as_secs_f64() / rust.as_secs_f64()));
            println!(
                "{:<10} | {:>8} | {:>10} | {:>9} | {:>12} | {:>10.1} | {:>11} | {:>15}",
                name,
                children,
                us(time),
                us(cpu),
                first.fuel_used,
                first.peak_memory_bytes as f64 / (1 << 20) as f64,
                ratio,
                idle
            );
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
