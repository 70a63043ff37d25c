//! A module's compiled code is mapped, not copied into the operator's anonymous memory: the
//! Python classic rules' code is about 36 MiB, and loaded from the compiled cache with
//! `Component::deserialize` it was all resident, anonymous, for as long as the module served
//! (release, idle with the Python rules: 98.6 MiB RSS, 36 MiB of it that copy). Mapped from a
//! sealed memfd (sandbox/sealed_code.rs), only the pages in use are resident; and on its way
//! from the cache file it is never whole in memory either.
//! Alone in its test binary: other tests' threads would allocate while it measures.

mod common;

use std::path::PathBuf;

use common::compile_once::LoadOnce as _;
use zundoko_operator::process::memory::{no_transparent_huge_pages, purge_freed_segments_at_once, release_after_compile};
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

#[global_allocator]
static ALLOCATOR: zundoko_operator::process::allocator::OperatorAllocator = zundoko_operator::process::allocator::OperatorAllocator;

/// A field of /proc/self/status, in kB.
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The engine the languages tests use (roomy limits), on the compiled cache they share.
fn engine() -> SandboxEngine {
    SandboxEngine::new(SandboxLimits { fuel: 2_000_000_000, memory_bytes: 256 << 20, inline_fuel: 2_000_000_000, ..SandboxLimits::default() })
        .unwrap()
        .with_compiled_cache(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compiled-cache"))
        .unwrap()
}

#[test]
fn the_python_rules_code_loaded_from_the_cache_is_mapped_not_copied_into_anonymous_memory() {
    // As main.rs does first thing.
    no_transparent_huge_pages();
    purge_freed_segments_at_once();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules/zundoko-classic-py.wasm");
    if !path.exists() {
        common::ci::cannot_run(&format!("{} is missing, so its code's residency was not measured: build it with `make guest-langs`", path.display()));
        return;
    }
    let bytes = std::fs::read(&path).unwrap();
    // Compiled once into the cache (a cold compile, if the languages tests have not made it).
    drop(engine().load_once(&bytes).unwrap());
    release_after_compile();

    let before = status_kb("RssAnon:");
    // The peak from here (Linux 4.0+: "5" resets VmHWM to the RSS now).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let rss_before = status_kb("VmRSS:");
    let module = engine().load(&bytes).unwrap();
    let peak = status_kb("VmHWM:");
    release_after_compile();
    let after = status_kb("RssAnon:");
    let code_kb = module.code_bytes() as u64 / 1024;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    println!("RssAnon {before} kB -> {after} kB loading the Python rules from the cache (their code: {code_kb} kB), the `info` call's instance included; RSS {rss_before} kB, at most {peak} kB while loading");
    assert!(code_kb > 16 << 10, "the Python rules' code is tens of MiB: {code_kb} kB");
    assert!(maps.contains("/memfd:zundoko-compiled-code"), "the code is not mapped from a sealed memfd:\n{maps}");
    // Copied, the code alone would add its whole size; mapped, the load adds the heap's
    // metadata and the instance's written pages.
    assert!(after < before + code_kb / 3, "anonymous memory grew by {} kB loading {code_kb} kB of code: copied, not mapped", after.saturating_sub(before));
    // Nor whole in memory on its way: copied from the cache file into the memfd in pieces, its
    // MAC computed on the way (compiled_cache.rs). Measured: the peak +25 MiB over the start
    // (the code's pages the load and the `info` call touch, the instance's); read whole first
    // (the code in a buffer, then copied), +46 MiB.
    assert!(peak < rss_before + code_kb, "the RSS peaked {} kB above its start loading {code_kb} kB of code: read whole", peak - rss_before);
    assert_eq!(module.info().unwrap().name, "zundoko-classic-py", "the mapped code runs");
}
