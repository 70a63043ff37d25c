//! The fresh-instance self-check: before the operator serves, a dropped instance's memory, table
//! and globals must come back as the module's image, byte for byte, through the same pool reset
//! every call's slot goes through.
//!
//! "Every call runs in a fresh instance" is what every other guarantee stands on, and it rests
//! on the kernel as much as on wasmtime: the pool resets a used slot by asking Linux which pages
//! the guest changed (`PAGEMAP_SCAN`, vendor/README.md) and copying only those back. If a kernel
//! ever answers that query differently (a narrowed page flag, a new kind of page), slots would be
//! reused dirty and nothing else would notice. So the check runs the real thing once per process:
//! a one-slot pool configured as the engine's, a module whose call dirties its memory in far more
//! than 32 separate runs (the scan must resume), past the keep-resident budget (the rest must be
//! decommitted), grows it, changes its table and a global; then the instance is dropped, the
//! module instantiated again in the same slot, and everything compared with the image.
//!
//! A mismatch with the scan on turns the scan off (the default reset, which rewrites or
//! decommits the whole used part, stays correct), and says so; a mismatch without it means no
//! reset can be trusted and the operator must not serve.

use std::sync::OnceLock;

use wasmtime::{Config, Engine, Instance, InstanceAllocationStrategy, Module, PoolingAllocationConfig, Store, Val};

/// Whether the pool may reset slots with `PAGEMAP_SCAN` (`--pagemap-scan`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PagemapScan {
    /// Where the kernel has it and the self-check passes with it.
    #[default]
    Auto,
    /// Never: every used slot is reset the default way (to compare both, or to rule the scan out).
    Off,
}

/// How used slots are reset, as the self-check settled it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResetPath {
    /// Only the pages a call changed are copied back (`PAGEMAP_SCAN`); the check passed with it.
    Pagemap,
    /// The whole used part of a slot is reset; `why` says why not the scan.
    Default { why: String },
    /// The scan failed the check (`mismatch`), so the whole used part of a slot is reset.
    FellBack { mismatch: String },
    /// Not even the default reset gave the image back: no instance can be trusted to be fresh.
    Broken { why: String },
}

impl ResetPath {
    /// Whether the engine's pool scans.
    pub fn scans(&self) -> bool {
        matches!(self, ResetPath::Pagemap)
    }

    /// The metric's label: `pagemap`, `default` or `broken`.
    pub fn label(&self) -> &'static str {
        match self {
            ResetPath::Pagemap => "pagemap",
            ResetPath::Default { .. } | ResetPath::FellBack { .. } => "default",
            ResetPath::Broken { .. } => "broken",
        }
    }

    /// One line for `/readyz` and the log.
    pub fn describe(&self) -> String {
        match self {
            ResetPath::Pagemap => "instances reset by pagemap scan (self-check passed)".into(),
            ResetPath::Default { why } => format!("instances reset the default way ({why}; self-check passed)"),
            ResetPath::FellBack { mismatch } => {
                format!("instances reset the default way (pagemap scan turned off: with it, {mismatch}; self-check passed without it)")
            }
            ResetPath::Broken { why } => format!("fresh-instance self-check failed on the default reset: {why}"),
        }
    }
}

/// The environment variable that makes the check see a leftover (for the tests of the fallback):
/// `mismatch` compares the dirtied instance itself, as a slot reused without a reset would be
/// seen, when the scan is on; `mismatch-always` on both paths.
pub const FAULT_ENV: &str = "ZUNDOKO_FAULT_RESET_CHECK";

/// How used slots are reset in this process for `choice`: the check runs once per choice.
pub fn reset_path(choice: PagemapScan) -> &'static ResetPath {
    static AUTO: OnceLock<ResetPath> = OnceLock::new();
    static OFF: OnceLock<ResetPath> = OnceLock::new();
    let cell = match choice {
        PagemapScan::Auto => &AUTO,
        PagemapScan::Off => &OFF,
    };
    cell.get_or_init(|| {
        let fault = std::env::var(FAULT_ENV).unwrap_or_default();
        settle(choice, PoolingAllocationConfig::is_pagemap_scan_available(), |scan| {
            check_reset(scan, fault == "mismatch-always" || (scan && fault == "mismatch"))
        })
    })
}

/// The decision, apart from the check itself: `check(scan)` is `Err(what differed)`.
fn settle(choice: PagemapScan, available: bool, mut check: impl FnMut(bool) -> Result<(), String>) -> ResetPath {
    let path = match (choice, available) {
        (PagemapScan::Off, _) => ResetPath::Default { why: "pagemap scan off (--pagemap-scan off)".into() },
        (PagemapScan::Auto, false) => ResetPath::Default { why: "no pagemap scan on this kernel (Linux 6.7+ has it)".into() },
        (PagemapScan::Auto, true) => match check(true) {
            Ok(()) => return ResetPath::Pagemap,
            Err(mismatch) => ResetPath::FellBack { mismatch },
        },
    };
    match check(false) {
        Ok(()) => path,
        Err(mismatch) => ResetPath::Broken { why: mismatch },
    }
}

/// The check's module: an 8 MiB memory whose image is 32 patterned runs, a funcref table with
/// 16 elements, and a global; `dirty` changes all of it.
const MEMORY_PAGES: u64 = 128;
const TABLE_SIZE: u64 = 64;
const IMAGE_RUNS: usize = 32;
const GLOBAL_INIT: i64 = 0x5a5a_5a5a_5a5a_5a5a;

fn image_run(i: usize) -> (usize, Vec<u8>) {
    // Runs of 1 KiB every 192 KiB: image pages among zero pages, within and past the budget.
    let offset = i * (192 << 10) + 40;
    (offset, (0..1024).map(|b| (b * 7 + i * 13 + 1) as u8 | 1).collect())
}

fn check_wat() -> String {
    let data: String = (0..IMAGE_RUNS)
        .map(|i| {
            let (offset, bytes) = image_run(i);
            let escaped: String = bytes.iter().map(|b| format!("\\{b:02x}")).collect();
            format!("(data (i32.const {offset}) \"{escaped}\")\n")
        })
        .collect();
    format!(
        r#"(module
  (memory (export "memory") {MEMORY_PAGES})
  (table $t (export "table") {TABLE_SIZE} funcref)
  (global $g (export "global") (mut i64) (i64.const {GLOBAL_INIT}))
  (func $one (result i32) i32.const 1)
  (func $two (result i32) i32.const 2)
  (elem (i32.const 0) $one $two $one $two $one $two $one $two $one $two $one $two $one $two $one $two)
  {data}
  ;; Dirty the memory in separate runs: one word every `stride` bytes (twice the host's page
  ;; size, so each write is a run of its own) over the first 2 MiB, then 5 MiB in one run from
  ;; 3 MiB on (past the keep-resident budget), then grow it and write in the new pages; null
  ;; the table's elements, fill the rest, grow it; change the global.
  (func (export "dirty") (param $stride i32) (param $seed i32)
    (local $at i32)
    (loop $runs
      (i32.store (local.get $at) (i32.xor (local.get $seed) (local.get $at)))
      (local.set $at (i32.add (local.get $at) (local.get $stride)))
      (br_if $runs (i32.lt_u (local.get $at) (i32.const 0x200000))))
    (memory.fill (i32.const 0x300000) (local.get $seed) (i32.const 0x500000))
    (drop (memory.grow (i32.const 16)))
    (memory.fill (i32.const 0x800000) (local.get $seed) (i32.const 0x100000))
    (table.fill $t (i32.const 0) (ref.null func) (i32.const 16))
    (table.fill $t (i32.const 16) (ref.func $two) (i32.const 48))
    (drop (table.grow $t (ref.func $one) (i32.const 8)))
    (global.set $g (i64.extend_i32_u (local.get $seed))))
  (func (export "one") (result i32) call $one))"#
    )
}

/// The memory the module's image gives, byte for byte.
fn expected_memory() -> Vec<u8> {
    let mut memory = vec![0u8; (MEMORY_PAGES << 16) as usize];
    for i in 0..IMAGE_RUNS {
        let (offset, bytes) = image_run(i);
        memory[offset..offset + bytes.len()].copy_from_slice(&bytes);
    }
    memory
}

fn host_page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(4096)
}

/// An engine whose pool is the operator's (module.rs's `pool`), with one slot: the keep-resident
/// budget with the scan is 4 MiB, which `dirty` spends mid-memory, so the rest must be decommitted.
fn one_slot_engine(scan: bool) -> Result<Engine, String> {
    let mut config = Config::new();
    config.parallel_compilation(false);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(super::module::pool(1, 16 << 20, scan)));
    Engine::new(&config).map_err(|e| format!("cannot make the check's engine: {e:#}"))
}

/// Instantiate, dirty, drop, instantiate again in the same slot, and compare. `leave_dirty`
/// compares the dirtied instance itself instead (the fault the tests force).
pub fn check_reset(scan: bool, leave_dirty: bool) -> Result<(), String> {
    let engine = one_slot_engine(scan)?;
    let wasm = wat::parse_str(check_wat()).map_err(|e| format!("the check's module does not parse: {e}"))?;
    let module = {
        // The one compile in `run`'s own process (every module compiles in the child): the
        // operator's own check module, a few KiB, at start; it waits its turn as every compile
        // does (compile_queue.rs), as the default module's.
        let _turn = super::compile_queue::COMPILES.turn_for(super::WhoCompiles::DefaultModule);
        Module::new(&engine, &wasm).map_err(|e| format!("the check's module does not compile: {e:#}"))?
    };
    let expected = expected_memory();
    let stride = i32::try_from(2 * host_page_size()).unwrap_or(8192);
    // Several rounds with different bytes: a slot reset once may hide a leftover of the second.
    for round in 0..3 {
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).map_err(|e| format!("cannot instantiate the check's module: {e:#}"))?;
        compare(&mut store, &instance, &expected).map_err(|e| format!("a new instance, round {round}: {e}"))?;
        let dirty = instance.get_typed_func::<(i32, i32), ()>(&mut store, "dirty").map_err(|e| e.to_string())?;
        dirty.call(&mut store, (stride, 0x3c3c_3c3c ^ round)).map_err(|e| format!("the check's call trapped: {e:#}"))?;
        if leave_dirty {
            return compare(&mut store, &instance, &expected).map_err(|e| format!("an instance after the reset, round {round}: {e}"));
        }
        drop(store);
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).map_err(|e| format!("cannot instantiate the check's module again: {e:#}"))?;
        compare(&mut store, &instance, &expected).map_err(|e| format!("an instance after the reset, round {round}: {e}"))?;
    }
    Ok(())
}

/// The instance's memory, table and global against the image; the first difference named.
fn compare(store: &mut Store<()>, instance: &Instance, expected: &[u8]) -> Result<(), String> {
    let memory = instance.get_memory(&mut *store, "memory").ok_or("no memory export")?;
    let data = memory.data(&*store);
    // memcmp first (this runs in every process before it serves); the place only on a difference.
    if data != expected
        && let Some(at) = data.iter().zip(expected).position(|(a, b)| a != b)
    {
        return Err(format!("the memory differs from its image at byte {at:#x} ({:#04x}, not {:#04x})", data[at], expected[at]));
    }
    if data.len() != expected.len() {
        return Err(format!("the memory is {} bytes, its image {}", data.len(), expected.len()));
    }
    let table = instance.get_table(&mut *store, "table").ok_or("no table export")?;
    if table.size(&*store) != TABLE_SIZE {
        return Err(format!("the table has {} elements, its image {TABLE_SIZE}", table.size(&*store)));
    }
    for i in 0..TABLE_SIZE {
        let element = table.get(&mut *store, i).and_then(|r| r.as_func().map(|f| f.copied()));
        let returns = match element {
            Some(Some(func)) => Some(func.typed::<(), i32>(&*store).and_then(|f| f.call(&mut *store, ())).map_err(|e| e.to_string())?),
            _ => None,
        };
        let wanted = (i < 16).then_some(if i % 2 == 0 { 1 } else { 2 });
        if returns != wanted {
            return Err(format!("table element {i} calls {returns:?}, its image {wanted:?}"));
        }
    }
    let global = instance.get_global(&mut *store, "global").ok_or("no global export")?;
    match global.get(&mut *store) {
        Val::I64(GLOBAL_INIT) => Ok(()),
        other => Err(format!("the global is {other:?}, its image {GLOBAL_INIT}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_reset_paths_give_the_image_back_here() {
        check_reset(false, false).unwrap();
        if PoolingAllocationConfig::is_pagemap_scan_available() {
            check_reset(true, false).unwrap();
        }
    }

    #[test]
    fn a_leftover_is_found_and_named() {
        let why = check_reset(false, true).unwrap_err();
        assert!(why.contains("the memory differs from its image at byte"), "{why}");
    }

    #[test]
    fn a_failed_scan_falls_back_and_a_failed_default_is_broken() {
        let passes = |_| Ok(());
        assert_eq!(settle(PagemapScan::Auto, true, passes), ResetPath::Pagemap);
        assert!(matches!(settle(PagemapScan::Off, true, passes), ResetPath::Default { why } if why.contains("--pagemap-scan off")));
        assert!(matches!(settle(PagemapScan::Auto, false, passes), ResetPath::Default { why } if why.contains("Linux 6.7")));
        let scan_fails = |scan: bool| if scan { Err("byte 0x10 differs".to_string()) } else { Ok(()) };
        let fallback = settle(PagemapScan::Auto, true, scan_fails);
        assert!(matches!(&fallback, ResetPath::FellBack { mismatch } if mismatch.contains("byte 0x10")), "{fallback:?}");
        assert!(!fallback.scans());
        assert!(fallback.describe().contains("pagemap scan turned off"), "{}", fallback.describe());
        let all_fail = |_| Err("byte 0x20 differs".to_string());
        assert!(matches!(settle(PagemapScan::Auto, true, all_fail), ResetPath::Broken { why } if why.contains("0x20")));
        assert!(matches!(settle(PagemapScan::Off, false, all_fail), ResetPath::Broken { .. }));
    }
}
