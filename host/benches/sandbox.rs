//! Sandbox cost per reconcile: a fresh instance plus the call, against the same rules linked
//! natively, at 5 and at 1,000 children. Prints figures; asserts nothing about time.
//!
//! `make bench` (release). Needs the components from `make guest`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use zundoko_operator::supply::ModuleLoader;
use zundoko_operator::supply::contract::rules::{NativeRules, Rules};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};
use zundoko_operator::supply::sources::digest;
use zundoko_operator::supply::contract::plan_check::PlanLimits;

mod common;
use common::observed;


/// Median over batches of the mean time per call: robust to a noisy shared machine.
fn measure(iterations: u32, mut f: impl FnMut()) -> Duration {
    for _ in 0..iterations / 10 + 1 {
        f();
    }
    let batch = (iterations / 20).max(1);
    let mut means: Vec<Duration> = (0..20)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed() / batch
        })
        .collect();
    means.sort();
    means[means.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/modules");
    let bytes = std::fs::read(dir.join("zundoko-classic.wasm")).expect("run `make guest` first");
    let engine = SandboxEngine::new(SandboxLimits::default()).unwrap();
    let compile_start = Instant::now();
    let module = engine.load(&bytes).unwrap();
    let load_time = compile_start.elapsed();
    let native = NativeRules::new(zundoko_rules::classic());

    println!("guest zundoko-classic.wasm: {} bytes; compile + check + first info(): {:.1} ms", bytes.len(), load_time.as_secs_f64() * 1e3);
    let instance_only = measure(20_000, || {
        black_box(module.info().unwrap());
    });
    println!("fresh instance + trivial call (info): {} us", us(instance_only));
    println!();
    println!("{:>9} | {:>16} | {:>10} | {:>8} | {:>9}", "children", "wasm fresh+call", "native", "ratio", "fuel");
    println!("{:->9}-+-{:->16}-+-{:->10}-+-{:->8}-+-{:->9}", "", "", "", "", "");
    for (children, iterations) in [(5u32, 20_000u32), (1000, 2_000)] {
        let input = observed(children);
        let wasm_plan = Rules::reconcile(&module, &input).unwrap();
        assert_eq!(wasm_plan.value, native.reconcile(&input).unwrap().value, "wasm and native agree");
        let wasm = measure(iterations, || {
            black_box(Rules::reconcile(&module, black_box(&input)).unwrap());
        });
        let native_time = measure(iterations * 10, || {
            black_box(native.reconcile(black_box(&input)).unwrap());
        });
        println!(
            "{:>9} | {:>13} us | {:>7} us | {:>7.1}x | {:>9}",
            children,
            us(wasm),
            us(native_time),
            wasm.as_secs_f64() / native_time.as_secs_f64(),
            wasm_plan.fuel_used
        );
    }
    extra_modules(&engine, &bytes);
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.split_whitespace().next()?.parse().ok()).unwrap_or(0)
}

/// What each further module costs the operator (several rule sets, a rollout's candidate):
/// N modules with distinct bytes, each compiled, checked and kept, as rule sets keep them.
fn extra_modules(engine: &SandboxEngine, bytes: &[u8]) {
    const N: u64 = 32;
    let loader = ModuleLoader::new(engine.clone(), PlanLimits::default());
    let before = rss_kib();
    let started = Instant::now();
    let kept: Vec<_> = (0..N)
        .map(|n| {
            // The same rules with a custom section appended: other bytes, another digest.
            let mut distinct = bytes.to_vec();
            let payload = n.to_le_bytes();
            distinct.extend([0u8, (1 + 5 + payload.len()) as u8, 5]);
            distinct.extend(b"bench");
            distinct.extend(payload);
            loader.load(&distinct, &digest(&distinct)).unwrap()
        })
        .collect();
    let took = started.elapsed();
    let grown = rss_kib().saturating_sub(before);
    let (count, code) = loader.footprint();
    assert_eq!(count as u64, N);
    println!();
    println!(
        "{N} further modules compiled and kept: RSS +{:.0} KiB each ({:.1} MiB in all), of which compiled code and metadata {:.0} KiB each; {:.1} ms each to check",
        grown as f64 / N as f64,
        grown as f64 / 1024.0,
        code as f64 / 1024.0 / N as f64,
        took.as_secs_f64() * 1e3 / N as f64
    );
    drop(kept);
}
