//! How much one guest call may use. Every limit is per call: each call gets a fresh Store.

/// Limits on one guest call.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxLimits {
    /// CPU budget in wasmtime fuel units (about one per wasm instruction).
    pub fuel: u64,
    /// Cap on the guest's linear memory, in bytes. Growing past it traps.
    pub memory_bytes: usize,
    /// Cap on the host (native) stack the guest's wasm code may use, in bytes.
    pub wasm_stack_bytes: usize,
    /// Log lines a single call may emit through the log import; the rest are counted only.
    pub max_log_lines: usize,
    /// Longest log line kept, in bytes; longer lines are cut.
    pub max_log_line_bytes: usize,
    /// Guest calls that may run at once (instance slots kept ready in the pool). Under 128:
    /// wasmtime splits a pool of 128 slots or more into a shard per core, a thread looks for
    /// a module's warm slot in its own shard only, and so every shard warms copies of its own
    /// of each module (an interpreter's slot keeps about 7 MiB of its snapshot mapped).
    pub max_concurrent_calls: u32,
    /// Fuel a call may use on the async runtime's own thread (`RulesModule::reconcile_quick`);
    /// a call that needs more is made again, from the start and with the whole `fuel`, off the
    /// async runtime (a call is a pure function of its input, so the second call decides what
    /// the first would have). The default rules need ~25k at 5 children and ~1.5M at 1,000, so
    /// nearly every call is made without a thread handoff, and a slow or hostile module holds an
    /// async worker for at most this much (well under a millisecond) per call.
    pub inline_fuel: u64,
    /// The most fuel a module may ask for (its `zundoko:budget`); `fuel` is what it gets
    /// when it asks for nothing.
    pub max_fuel: u64,
    /// The most memory a module may ask for; every instance slot is sized for it.
    pub max_memory_bytes: usize,
    /// How big a module may be (`test`'s size check): the product's budget, which a Rust
    /// module fits many times over and a ConfigMap holds.
    pub module_bytes: usize,
    /// The most a module may ask for (an interpreter's component is tens of MiB).
    pub max_module_bytes: usize,
    /// Whether used instance slots may be reset by `PAGEMAP_SCAN` (reset_check.rs).
    pub pagemap_scan: super::reset_check::PagemapScan,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            // The default rules use ~25k fuel at 5 children and ~1.5M at 1,000: plenty of room,
            // and an endless loop still stops within a few tens of milliseconds.
            fuel: 50_000_000,
            memory_bytes: 32 << 20,
            wasm_stack_bytes: 512 << 10,
            max_log_lines: 64,
            max_log_line_bytes: 1024,
            max_concurrent_calls: 127,
            inline_fuel: 2_000_000,
            // Room for an interpreter (see docs/benchmarks.md's figures per language): a CPython
            // call at 100 children stays well under both.
            max_fuel: 2_000_000_000,
            max_memory_bytes: 256 << 20,
            module_bytes: 64 << 10,
            max_module_bytes: 64 << 20,
            pagemap_scan: super::reset_check::PagemapScan::Auto,
        }
    }
}
