//! An interpreter's component compiled once for the whole suite, not once per test: nextest runs
//! every test as a process of its own, several at once, and on a fresh clone the tests' compiled
//! cache (target/test-compiled-cache and the like) is empty, so the tests that load CPython or
//! SpiderMonkey at the same moment would each compile its tens of MiB of code (a minute of CPU
//! or more in a debug build, on a machine whose cores the other tests need). One process per
//! module compiles under a lock file, and keeps the code in the cache; the others wait for the
//! lock, then load what it kept (wasmtime checks it, and the cache its MAC, as always).

use std::path::PathBuf;

use zundoko_operator::supply::sandbox::{GuestError, RulesModule, SandboxEngine};

/// The bound on the suite's shared compiled caches: the code of every interpreter's component the
/// suite loads (a dozen, 35-40 MiB each) kept at once. Under the operator's default of 128 MiB,
/// each component written evicted others, and the next test to load one compiled it again.
pub const SUITE_CACHE_BYTES: u64 = 1 << 30;

pub trait LoadOnce {
    /// [`SandboxEngine::load`], one process at a time for the same bytes, so that an engine with
    /// a compiled cache shared across the suite compiles them once.
    fn load_once(&self, bytes: &[u8]) -> Result<RulesModule, GuestError>;
}

impl LoadOnce for SandboxEngine {
    fn load_once(&self, bytes: &[u8]) -> Result<RulesModule, GuestError> {
        let cache = self.compiled_cache().expect("load_once is for engines with a compiled cache: without one, the lock saves nothing");
        cache.disk().set_max_bytes(SUITE_CACHE_BYTES);
        let locks = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-locks");
        std::fs::create_dir_all(&locks).unwrap_or_else(|e| panic!("{}: {e}", locks.display()));
        let digest = zundoko_operator::supply::digest::digest(bytes).replace(':', "-");
        let path = locks.join(format!("{digest}.lock"));
        let lock = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Released when `lock` is dropped, after the load, or by the kernel if the test dies.
        lock.lock().unwrap_or_else(|e| panic!("locking {}: {e}", path.display()));
        self.load(bytes)
    }
}
