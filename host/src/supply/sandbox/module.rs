//! A rules module: compiled once, checked against the world, pre-instantiated; every call
//! then runs in a fresh instance of its own, within the sandbox limits.

use std::sync::Arc;

use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, Trap};
use zundoko_rules::{ModuleInfo, Observed, Plan};

use super::bindings::{self, ALLOWED_IMPORTS, RULES_EXPORT, ZundokoRules, ZundokoRulesPre};
use super::convert;
use super::error::GuestError;
use super::guest_threads::GuestThreads;
use super::host_state::{GuestLog, HostState};
use super::in_flight::GUEST_MEMORY;
use super::limits::SandboxLimits;
use super::turns::{CallShares, Turns};
use super::wasi::{self, CallInput};

/// Who a module is: what `check` prints and what every Hikawa's status names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleIdentity {
    pub info: ModuleInfo,
    /// `sha256:<hex>` of the module bytes (`native:<name>` for rules linked into the host).
    pub digest: String,
    pub size: usize,
}

impl ModuleIdentity {
    /// The module as the metrics name it.
    pub fn label(&self) -> crate::process::metrics::ModuleLabel<'_> {
        crate::process::metrics::ModuleLabel { name: &self.info.name, version: &self.info.version, digest: &self.digest }
    }
}

/// What one successful guest call produced.
#[derive(Debug)]
pub struct GuestOutcome<T> {
    pub value: T,
    pub fuel_used: u64,
    pub logs: Vec<GuestLog>,
    /// Log lines past the call's bound (`max_log_lines`), output past its byte bound counted as
    /// one: dropped, and counted here and in a line of the operator's log.
    pub dropped_log_lines: usize,
    /// The largest the guest's linear memory was during the call, in bytes.
    pub peak_memory_bytes: usize,
}

/// A returned pool slot's memory is reset in place, not with madvise, up to this much of the
/// pages a call wrote. A Rust module's whole initial memory is 256 KiB (the Makefile's
/// `--initial-memory`), which holds even a 1,000-children call. With PAGEMAP_SCAN (Linux 6.7+) only the pages the call wrote are
/// copied back or zeroed, so the next call neither faults them in nor pays a TLB shootdown;
/// one ioctl is then the only syscall per call. Measured (release, 2-core VM): 5 children
/// 14 us -> 8 us, 1,000 children 215 us -> 170 us; 1 MiB is no faster. Without PAGEMAP_SCAN
/// the whole 256 KiB would be memset, so keep the 64 KiB that was measured best then.
/// An interpreter's call (CPython, SpiderMonkey) writes 1-2 MiB of its snapshot in hundreds of
/// runs of pages; the patched wasmtime (vendor/README.md) scans past 32 runs, so with a budget
/// that holds them every written page is copied back from the image in place and the clean
/// ones stay mapped: a warm slot's next call faults nothing in. Measured (issue 38,
/// docs/benchmarks.md, release, this 2-core VM): Python 5 children 2.0 ms -> 0.9-1.2 ms,
/// JavaScript 1.4 -> 0.53-0.59 ms, page faults of the languages bench 244k -> 53k; an idle
/// Python slot keeps 1.6-2.1 MiB, JavaScript 1.1 MiB; 16 and 64 MiB were no faster. It also
/// bounds what a warm slot keeps of a module that writes more per call.
const KEEP_RESIDENT: usize = 4 << 20;
const KEEP_RESIDENT_WITHOUT_PAGEMAP: usize = 64 << 10;
/// Tables (one small funcref table, in wit-component's shim for the log import).
const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// The pool of instance slots: `slots` of each, memories up to `max_memory` bytes, a used slot
/// reset with `PAGEMAP_SCAN` or not. One definition for the engine and its self-check
/// (reset_check.rs), so the check proves the reset every call's slot goes through.
pub(super) fn pool(slots: u32, max_memory: usize, pagemap: bool) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .max_memory_size(max_memory)
        .pagemap_scan(if pagemap { Enabled::Yes } else { Enabled::No })
        .linear_memory_keep_resident(if pagemap { KEEP_RESIDENT } else { KEEP_RESIDENT_WITHOUT_PAGEMAP })
        .table_keep_resident(TABLE_KEEP_RESIDENT)
        // Calls are synchronous: no fiber stacks (wasmtime-wasi turns wasmtime's async
        // support on, whose pool would otherwise map 1,000 stacks of 2 MiB up front).
        .total_stacks(1);
    pool
}
/// Native stack for a WASI guest's call thread, besides the wasm stack limit: the host
/// functions' and wasmtime's own frames.
const GUEST_THREAD_STACK: usize = 2 << 20;

/// The wasmtime engine and linker every module is compiled and linked with.
#[derive(Clone)]
pub struct SandboxEngine {
    engine: Engine,
    linker: Arc<Linker<HostState>>,
    limits: SandboxLimits,
    /// Compiled modules kept on disk, if a cache directory was given.
    compiled: Option<Arc<super::compiled_cache::CompiledCache>>,
    /// Where modules compile (every one, whatever its size), if not here.
    compiler: Option<super::compiler_process::CompilerProcess>,
    /// The threads WASI modules' calls run on, kept between calls.
    threads: Arc<GuestThreads>,
    /// How many of one WASI module's calls run at once: the node's cores (in_flight.rs); and
    /// of one tenant's modules' together while other tenants' calls run or wait (turns.rs).
    calls_per_module: usize,
    /// Every module's turns, shared between tenants.
    calls: Arc<CallShares>,
    /// Every module's decisions and their guest time, by tenant (counted by their callers).
    tenant_calls: Arc<crate::supply::tenant_calls::TenantCalls>,
    /// How used slots are reset, as the self-check at start settled it.
    reset: &'static super::reset_check::ResetPath,
}

impl SandboxEngine {
    /// The engine the operator and the commands run modules with, once the fresh-instance
    /// self-check (reset_check.rs) has settled how used slots are reset; an error if no reset
    /// gave a slot back as its image.
    pub fn new(limits: SandboxLimits) -> anyhow::Result<Self> {
        let reset = super::reset_check::reset_path(limits.pagemap_scan);
        if let super::reset_check::ResetPath::Broken { why } = reset {
            anyhow::bail!("fresh-instance self-check failed: {why}: no instance can be trusted to start clean, so nothing is run");
        }
        Self::with_reset(limits, reset)
    }

    /// The engine of the compiler process, which compiles and never instantiates: no self-check.
    pub fn for_compiling(limits: SandboxLimits) -> anyhow::Result<Self> {
        static COMPILES_ONLY: super::reset_check::ResetPath =
            super::reset_check::ResetPath::Default { why: String::new() };
        Self::with_reset(limits, &COMPILES_ONLY)
    }

    fn with_reset(limits: SandboxLimits, reset: &'static super::reset_check::ResetPath) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.consume_fuel(true);
        config.max_wasm_stack(limits.wasm_stack_bytes);
        // Compile on the calling thread: a module is tens of KiB and compiles in tens of
        // milliseconds, and a compile thread pool would stay alive with a malloc arena of its
        // own for every thread (a few MiB of the operator's idle memory).
        config.parallel_compilation(false);
        // Pooling: instance slots are mapped once and reused, so a fresh instance per call
        // costs microseconds instead of an mmap/munmap round trip per memory. The pool
        // bounds how many calls run at once; a call beyond it fails and is retried.
        // The scan only where the self-check saw it give every slot back as its image.
        let max_memory = limits.memory_bytes.max(limits.max_memory_bytes).next_multiple_of(64 << 10) + (64 << 10);
        let pool = pool(limits.max_concurrent_calls, max_memory, reset.scans());
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        bindings::zundokokiyoshi::rules::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
        wasi::add_to_linker(&mut linker)?;
        // As many kept threads as calls can run at once on the node's cores.
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let calls_per_module = cores.min(limits.max_concurrent_calls as usize);
        let threads = GuestThreads::new(GUEST_THREAD_STACK + limits.wasm_stack_bytes, calls_per_module);
        let calls = CallShares::new(calls_per_module, calls_per_module);
        let tenant_calls = Arc::default();
        Ok(SandboxEngine { engine, linker: Arc::new(linker), limits, compiled: None, compiler: None, threads, calls_per_module, calls, tenant_calls, reset })
    }

    /// Keep compiled modules in `dir/compiled/`, and load them from there instead of compiling.
    pub fn with_compiled_cache(mut self, dir: &std::path::Path) -> anyhow::Result<Self> {
        self.compiled = Some(Arc::new(super::compiled_cache::CompiledCache::open(dir).map_err(anyhow::Error::msg)?));
        Ok(self)
    }

    /// Let `calls` of one WASI module's calls run at once instead of the node's cores: a test
    /// then sets the count it asserts on, whatever machine it runs on.
    pub fn with_calls_per_module(mut self, calls: usize) -> Self {
        self.calls_per_module = calls.clamp(1, self.limits.max_concurrent_calls as usize);
        self.calls = CallShares::new(self.calls_per_module, self.calls_per_module);
        self.threads = GuestThreads::new(GUEST_THREAD_STACK + self.limits.wasm_stack_bytes, self.calls_per_module);
        self
    }

    /// Compile big modules in a child process (see [`super::compiler_process`]), into the
    /// compiled-module cache (a private temporary one if none was given).
    pub fn with_compiler_process(mut self, compiler: super::compiler_process::CompilerProcess) -> anyhow::Result<Self> {
        if self.compiled.is_none() {
            // Private (0700) and freshly named: never a name another user could make first.
            let dir = crate::supply::disk_cache::private_temp_dir("zundoko-operator-")?;
            self = self.with_compiled_cache(&dir)?;
        }
        self.compiler = Some(compiler);
        Ok(self)
    }

    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// The turns every module of this engine takes, by tenant (what a test counts).
    pub fn call_shares(&self) -> &Arc<CallShares> {
        &self.calls
    }

    /// The decisions every module of this engine made and their guest time, by tenant.
    pub fn tenant_calls(&self) -> &Arc<crate::supply::tenant_calls::TenantCalls> {
        &self.tenant_calls
    }

    /// How used instance slots are reset (the self-check's outcome).
    pub fn reset_path(&self) -> &'static super::reset_check::ResetPath {
        self.reset
    }

    /// The engine underneath (what the compiler process compiles with).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The compiled-module cache, if any.
    pub fn compiled_cache(&self) -> Option<&super::compiled_cache::CompiledCache> {
        self.compiled.as_deref()
    }

    /// The module's code: from the cache, from the compiler process, or compiled here. With a
    /// compiler process (`run` always has one, cli/run.rs), every module compiles in it and
    /// none here, so each compile of `run` waits its fair turn (compile_queue.rs, taken in
    /// `compile_to`); only an engine without one (the commands run by hand: check, simulate,
    /// test, push, explain) compiles in its own process.
    fn compile(&self, bytes: &[u8]) -> Result<Component, GuestError> {
        let not_a_component = |e: wasmtime::Error| GuestError::NotAComponent(format!("{e:#}"));
        match (&self.compiled, &self.compiler) {
            (Some(cache), Some(compiler)) => {
                if let Some(component) = cache.lookup(&self.engine, bytes) {
                    return Ok(component);
                }
                // Kept as it comes, and mapped from a sealed copy, never whole in memory
                // (compiled_cache.rs). Code that would not fit the cache's room is refused as it
                // comes: kept, it would push the cache past its bound (and its volume's).
                // Its tenant's part of the room, while other tenants keep files too.
                let tenant = super::compile_queue::WhoCompiles::on_this_thread().tenant();
                let (room, part) = cache.disk().room_for(&tenant);
                let (mut handed, mut over) = (crate::supply::disk_cache::MAC_BYTES as u64, false);
                // Within a tenant policy's compile ceilings, when its rule set loads it.
                let compiler = compiler.bounded();
                let loaded = cache.compile_keep_and_load(&self.engine, bytes, |sink| {
                    compiler.compile_to(bytes, &self.limits, &mut |piece: &[u8]| {
                        handed += piece.len() as u64;
                        if handed > room {
                            over = true;
                            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, format!("more than the cache's room of {room} bytes")));
                        }
                        sink(piece)
                    })
                });
                if over {
                    return Err(match part {
                        Some(room) => GuestError::CacheShareFull { tenant: tenant.to_string(), room },
                        None => GuestError::CacheFull { room },
                    });
                }
                let loaded = loaded?;
                loaded.map_err(|e| GuestError::CompileFailed(format!("the compiler process handed back code this engine cannot load: {e:#}")))
            }
            // `with_compiler_process` makes a cache: never, but never compiled here either.
            (None, Some(_)) => Err(GuestError::CompileFailed("a compiler process without a cache to hand its code to".into())),
            (Some(cache), None) => cache.component(&self.engine, bytes).map(|(component, _)| component).map_err(not_a_component),
            (None, None) => Component::new(&self.engine, bytes).map_err(not_a_component),
        }
    }

    /// Compile and check a module: a component, of the right world, asking for nothing but
    /// the log import, that answers `info` within the limits with metadata within bounds.
    pub fn load(&self, bytes: &[u8]) -> Result<RulesModule, GuestError> {
        precheck_bytes(bytes)?;
        // The budget first: a module asking for more than the ceilings is refused before
        // anything is spent compiling it.
        let limits = super::budget::grant(super::budget::read(bytes)?, &self.limits)?;
        let loaded = self.compile_and_check(bytes, limits);
        // Whether the module passed or not, the compiler is done: give back what it used.
        crate::process::memory::release_after_compile();
        loaded
    }

    fn compile_and_check(&self, bytes: &[u8], limits: SandboxLimits) -> Result<RulesModule, GuestError> {
        let component = self.compile(bytes)?;
        let uses_wasi = self.check_world(&component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .and_then(ZundokoRulesPre::new)
            .map_err(|e| GuestError::WorldMismatch {
                expected: RULES_EXPORT.into(),
                found: format!("an export whose types differ: {e:#}"),
            })?;
        let mut module = RulesModule {
            pre,
            uses_wasi,
            threads: Arc::clone(&self.threads),
            turns: Turns::of_module(&self.calls),
            limits,
            identity: Arc::new(ModuleIdentity {
                info: ModuleInfo { name: String::new(), version: String::new(), description: String::new() },
                digest: crate::supply::digest::digest(bytes),
                size: bytes.len(),
            }),
        };
        let info = module.info()?;
        super::metadata::check(&info)?;
        Arc::make_mut(&mut module.identity).info = info;
        Ok(module)
    }

    /// Whether the module implements the rules world and imports nothing the sandbox does not
    /// serve; `Ok(true)` if it imports WASI (served by the virtual WASI).
    fn check_world(&self, component: &Component) -> Result<bool, GuestError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(name, _)| name.to_string()).collect();
        if !exports.iter().any(|e| e == RULES_EXPORT) {
            let found = if exports.is_empty() { "no exports".to_string() } else { exports.join(", ") };
            return Err(GuestError::WorldMismatch { expected: RULES_EXPORT.into(), found });
        }
        let mut uses_wasi = false;
        for (import, _) in ty.imports(&self.engine) {
            if ALLOWED_IMPORTS.contains(&import) {
                continue;
            }
            if !wasi::imports::is_wasi(import) {
                return Err(GuestError::ForbiddenImport(import.to_string()));
            }
            if let Some(why) = wasi::imports::refusal(import) {
                return Err(GuestError::ForbiddenImport(why));
            }
            uses_wasi = true;
        }
        Ok(uses_wasi)
    }
}

/// Whether `error` is one of the bounds on what the host holds for a call: the virtual WASI's
/// own, its resource table full, or wasmtime's handle and hostcall limits (errors without a
/// type of their own: told by their message).
fn host_limit(error: &wasmtime::Error) -> Option<GuestError> {
    use wasmtime::component::ResourceTableError;
    let reached = |what: &str, limit| Some(GuestError::HostLimit { what: what.into(), limit });
    if let Some(reached) = error.downcast_ref::<wasi::HostLimitReached>() {
        return Some(GuestError::HostLimit { what: reached.what.into(), limit: reached.limit });
    }
    if let Some(ResourceTableError::Full) = error.downcast_ref::<ResourceTableError>() {
        return reached("WASI resources held at once (pollables, streams)", wasi::MAX_RESOURCES);
    }
    let message = format!("{error:#}");
    if message.contains("store handle limit exceeded") {
        return reached("resource handles held at once", wasi::MAX_HANDLES);
    }
    if message.contains("fuel allocated for hostcalls") {
        return reached("bytes copied from the guest in one host call", wasi::MAX_HOSTCALL_BYTES);
    }
    None
}

/// Cheap checks with better messages than the compiler's for the common mistakes.
fn precheck_bytes(bytes: &[u8]) -> Result<(), GuestError> {
    if bytes.is_empty() {
        return Err(GuestError::EmptyModule);
    }
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(GuestError::NotAComponent(format!(
            "the file does not start with the wasm magic bytes \\0asm ({} bytes, starts with {:02x?})",
            bytes.len(),
            &bytes[..bytes.len().min(8)]
        )));
    }
    // Bytes 4..8: version 1 (core module) or the component layer.
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(GuestError::NotAComponent(
            "it is a core wasm module, not a component: wrap it with `wasm-tools component new` (the Makefile's `guest` target does)".into(),
        ));
    }
    Ok(())
}

/// A loaded, checked module, ready to serve any number of calls (concurrently, too).
#[derive(Clone)]
pub struct RulesModule {
    pre: ZundokoRulesPre<HostState>,
    /// The module imports WASI: its calls get the virtual WASI, on one of `threads`.
    uses_wasi: bool,
    threads: Arc<GuestThreads>,
    /// Its WASI calls' turns, as many as the node's cores (turns.rs): awaited by async callers
    /// before a call is handed to a thread, waited for by the others when the call starts.
    turns: Turns,
    limits: SandboxLimits,
    identity: Arc<ModuleIdentity>,
}

impl RulesModule {
    pub fn identity(&self) -> &Arc<ModuleIdentity> {
        &self.identity
    }

    /// The limits its calls run under: the operator's, or what its budget asked for.
    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    /// Whether the module imports WASI (a language runtime's module; Rust modules do not).
    pub fn uses_wasi(&self) -> bool {
        self.uses_wasi
    }

    /// How many of its calls are worth running at once: the node's cores. A WASI module's
    /// calls beyond that wait for a turn (turns.rs); a Rust module's would only share
    /// the cores.
    pub fn calls_at_once(&self) -> usize {
        self.turns.count()
    }

    /// The threads its calls must run on, off the async runtime, and the turns an async caller
    /// awaits before it hands a call to them: a WASI module's (its host functions block on a
    /// runtime of their own); `None` for a module that needs none.
    pub fn own_threads(&self) -> Option<(&Arc<GuestThreads>, &Turns)> {
        self.uses_wasi.then_some((&self.threads, &self.turns))
    }

    /// Bytes of compiled machine code and metadata this module keeps in memory.
    pub fn code_bytes(&self) -> usize {
        let range = self.pre.instance_pre().component().image_range();
        range.end as usize - range.start as usize
    }

    /// The module's `info`, from a fresh instance (so, in effect, the cost of one instance).
    pub fn info(&self) -> Result<ModuleInfo, GuestError> {
        let outcome = self.call(self.limits.fuel, CallInput::default(), |store, rules| {
            rules.zundokokiyoshi_rules_rules().call_info(store)
        })?;
        Ok(convert::module_info(outcome.value))
    }

    /// One `reconcile` call in a fresh instance, within the whole CPU budget. Blocking: run it
    /// off the async runtime.
    pub fn reconcile(&self, observed: &Observed) -> Result<GuestOutcome<Plan>, GuestError> {
        self.reconcile_within(observed, self.limits.fuel)
    }

    /// The call, if it needs no more than `limits.inline_fuel`: short enough to make on an
    /// async worker. `None` if it ran out of that slice: make it again with [`reconcile`]
    /// (off the async runtime), which gets the whole budget.
    pub fn reconcile_quick(&self, observed: &Observed) -> Option<Result<GuestOutcome<Plan>, GuestError>> {
        // A WASI module's calls block on tokio inside wasmtime-wasi: never on an async worker.
        if self.uses_wasi {
            return None;
        }
        let slice = self.limits.inline_fuel.min(self.limits.fuel);
        match self.reconcile_within(observed, slice) {
            Err(GuestError::OutOfCpuBudget { .. }) if slice < self.limits.fuel => None,
            decided => Some(decided),
        }
    }

    fn reconcile_within(&self, observed: &Observed, fuel: u64) -> Result<GuestOutcome<Plan>, GuestError> {
        self.reconcile_metered(observed, fuel).0
    }

    /// [`reconcile`](Self::reconcile), and the fuel the call used whether it succeeded or not
    /// (all of `fuel` when it ran out): what the conformance suite reports.
    pub fn reconcile_metered(&self, observed: &Observed, fuel: u64) -> (Result<GuestOutcome<Plan>, GuestError>, u64) {
        let input = convert::observed(observed);
        let call_input = CallInput { now_ms: observed.now, entropy: observed.entropy };
        let (result, fuel_used) = self.call_metered(fuel, call_input, |store, rules| {
            rules.zundokokiyoshi_rules_rules().call_reconcile(store, &input)
        });
        let result = result.and_then(|outcome| match outcome.value {
            Ok(plan) => Ok(GuestOutcome {
                value: convert::plan(plan),
                fuel_used: outcome.fuel_used,
                logs: outcome.logs,
                dropped_log_lines: outcome.dropped_log_lines,
                peak_memory_bytes: outcome.peak_memory_bytes,
            }),
            Err(e) => Err(GuestError::Rules(convert::rule_error(e))),
        });
        (result, fuel_used)
    }

    /// Instantiate afresh, run `f` within the limits and `fuel`, and turn any trap into a
    /// typed error.
    fn call<R: Send>(
        &self,
        fuel: u64,
        input: CallInput,
        f: impl FnOnce(&mut Store<HostState>, &ZundokoRules) -> wasmtime::Result<R> + Send,
    ) -> Result<GuestOutcome<R>, GuestError> {
        self.call_metered(fuel, input, f).0
    }

    /// [`call`](Self::call), and the fuel used, failed calls included.
    fn call_metered<R: Send>(
        &self,
        fuel: u64,
        input: CallInput,
        f: impl FnOnce(&mut Store<HostState>, &ZundokoRules) -> wasmtime::Result<R> + Send,
    ) -> (Result<GuestOutcome<R>, GuestError>, u64) {
        if !self.uses_wasi {
            return self.call_here(fuel, input, f);
        }
        // Its turn among the module's calls first (no more at once than cores; none taken here
        // if its caller holds it), then its memory budget: interpreter calls in flight hold at
        // most the ceiling. What the host may hold for it beside (the virtual WASI's bounds) is
        // counted too. Always in this order, and a turn is never awaited while memory is held:
        // no call waits on one that waits on it.
        let _turn = self.turns.for_call_here();
        let _memory = GUEST_MEMORY.reserve(self.host_bytes_per_call(), self.limits.max_memory_bytes);
        // wasmtime-wasi's synchronous host functions block on a tokio runtime: the call runs
        // on a thread outside any runtime (see guest_threads.rs).
        self.threads.run(|| self.call_here(fuel, input, f)).unwrap_or_else(|e| (Err(GuestError::Host(e)), 0))
    }

    /// What one call of this module may make the process hold: its memory budget and, for a
    /// WASI module, what the virtual WASI's bounds let the host hold for it (the resource
    /// table, one host call's lifted data, the captured output).
    pub fn host_bytes_per_call(&self) -> usize {
        let wasi = if self.uses_wasi {
            wasi::HOST_BYTES_PER_CALL + self.limits.max_log_lines * self.limits.max_log_line_bytes
        } else {
            0
        };
        self.limits.memory_bytes + wasi
    }

    /// The call, on this thread.
    fn call_here<R>(
        &self,
        fuel: u64,
        input: CallInput,
        f: impl FnOnce(&mut Store<HostState>, &ZundokoRules) -> wasmtime::Result<R>,
    ) -> (Result<GuestOutcome<R>, GuestError>, u64) {
        let mut store = Store::new(self.pre.engine(), HostState::new(&self.limits, input));
        store.limiter(|state| &mut state.memory);
        if self.uses_wasi {
            store.set_max_component_handles(wasi::MAX_HANDLES);
            store.set_hostcall_fuel(wasi::MAX_HOSTCALL_BYTES);
        }
        if let Err(e) = store.set_fuel(fuel) {
            return (Err(GuestError::Host(format!("{e:#}"))), 0);
        }
        let result = self.pre.instantiate(&mut store).and_then(|rules| f(&mut store, &rules));
        let fuel_used = fuel - store.get_fuel().unwrap_or(0);
        let state = store.data_mut();
        if let Some(output) = state.wasi.as_ref().map(|wasi| wasi.take_output()) {
            state.logs.add_output(&output);
            state.stderr_last_line = output.last_stderr_line();
        }
        let dropped_log_lines = state.logs.dropped;
        if dropped_log_lines > 0 {
            tracing::warn!(target: "guest", dropped_log_lines, "the call's log lines past its bound of {} were dropped", self.limits.max_log_lines);
        }
        let result = match result {
            Ok(value) => Ok(GuestOutcome {
                value,
                fuel_used,
                logs: std::mem::take(&mut store.data_mut().logs.lines),
                dropped_log_lines,
                peak_memory_bytes: store.data().memory.peak,
            }),
            Err(error) => Err(self.classify(error, store.data(), fuel)),
        };
        (result, fuel_used)
    }

    fn classify(&self, error: wasmtime::Error, state: &HostState, fuel: u64) -> GuestError {
        if let Some(requested) = state.memory.refused {
            return GuestError::MemoryCap { limit: state.memory.limit, requested };
        }
        let guest_message = state.logs.panic_message().or_else(|| {
            // An interpreter's uncaught exception: the last line it wrote to stderr.
            state.stderr_last_line.as_deref().map(|line| crate::text::printable(line, 256))
        });
        if let Some(reached) = host_limit(&error) {
            return reached;
        }
        if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
            return GuestError::Trap { trap: format!("the guest called exit({})", exit.0), guest_message };
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => GuestError::OutOfCpuBudget { budget: fuel },
            Some(Trap::StackOverflow) => GuestError::StackOverflow,
            Some(trap) => GuestError::Trap { trap: trap.to_string(), guest_message },
            // Not a wasm trap: the canonical ABI refused what the guest returned (say, a
            // string that is not UTF-8) or the instance could not be created.
            None => GuestError::Trap { trap: format!("{error:#}"), guest_message },
        }
    }
}
