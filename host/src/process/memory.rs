//! Giving memory back after compiling a module. Compiling is rare (startup, a swap) and
//! touches a lot that nothing else needs: the code the compiler process hands back (tens of
//! MiB for an interpreter's component, dropped once loaded), and, when this process compiles
//! (`check`, `test`, `simulate`), Cranelift's code (about 8 MiB of the binary's pages,
//! executed only while compiling) and the heap it worked in. Afterwards
//! (`host/tests/memory.rs` checks it with the operator's allocator):
//!
//! - mimalloc (the operator's allocator) purges the memory it holds unused, at once rather
//!   than when it next gets to it; `malloc_trim(0)` does the same for glibc's arenas;
//! - the binary's read-only file mappings that hold no private (copied) page are dropped from
//!   this process's page tables with `MADV_DONTNEED`. They stay in the page cache; whatever
//!   code runs next is mapped again by a minor fault, so only the code in use stays resident.
//!   A mapping with a private page (relocated data, a debugger's breakpoint) is left alone:
//!   dropping it would lose that page.

/// glibc gives every thread that allocates while another holds the lock an arena of its own,
/// up to eight per core, and an arena's free memory is not shared: the guest calls on tokio's
/// blocking threads left 7 to 12 MiB in a dozen arenas at 1,000 Hikawas. Two arenas are plenty
/// for two cores. Call before starting threads. (`MALLOC_ARENA_MAX` in the environment wins.)
/// The operator's binary allocates through mimalloc (main.rs), so this bounds only what C code
/// and a process that keeps the system allocator (tests, benches) allocate through glibc.
pub fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a tunable of the allocator.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Transparent huge pages off for this process. A node whose THP setting is `always` (many
/// distributions' default, and this machine's) backs every 2 MiB-aligned region the allocator
/// touches with a whole 2 MiB page; mimalloc keeps its memory in such regions, and the
/// operator's RSS was 37 MiB idle and 41 MiB at the end of 1,000 songs instead of 21 and 29
/// (`make bench-scale`), at no CPU gain. Call first thing: pages already faulted stay as they are.
pub fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE) only sets a flag of this process's memory map.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Release what a compile left behind (best effort; does nothing off Linux). The operator's
/// binary allocates through mimalloc (main.rs), which keeps freed memory for a while before
/// it purges it: the code the compiler process handed back (a CPython component's: 36 MiB, in
/// a buffer grown to 64) stayed resident after it was dropped (host/tests/memory.rs), so
/// mimalloc is told to purge now. `malloc_trim` returns what went through glibc (C code, and
/// the processes that keep the system allocator: tests, benches).
pub fn release_after_compile() {
    release_freed();
    #[cfg(target_os = "linux")]
    {
        let dropped = drop_clean_code_mappings();
        tracing::debug!(kib = dropped / 1024, "dropped the binary's clean read-only mappings after a compile");
    }
}

/// Return to the system what the allocators hold freed, now. mimalloc purges a freed region
/// only some time after the free (10 ms), and only when it next runs in that arena: an idle
/// operator never does, so a big buffer freed after `release_after_compile` ran (the module's
/// own bytes, 18 MB for a CPython component, dropped once its check is over) stayed resident:
/// 37 MiB of the 98.6 MiB RSS of an operator idle with the Python rules (release).
pub fn release_freed() {
    // SAFETY: mi_collect only frees memory mimalloc holds unused; it is harmless when mimalloc
    // is not the global allocator (its own heaps are then empty).
    unsafe { mi_collect(true) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// mimalloc gives a freed segment back to the system (a big buffer's: the module's bytes, 18 MB
/// for a CPython component; the code read from the compiled cache, 36 MiB) only 100 ms after
/// the free (`purge_delay` 10 ms times `arena_purge_mult` 10), and only when it next runs in
/// that arena; `mi_collect` (in [`release_freed`]) did not reach them either, freed as they are
/// on another thread than the one that allocated them. So the operator idled with the Python
/// rules at 85 to 98 MiB RSS, 32 to 37 MiB of it freed buffers; with arena purges at once,
/// 36.4 MiB (release, `MIMALLOC_ARENA_PURGE_MULT=0`: the same setting), and 99 MiB at its peak
/// with 100 Hikawas singing instead of 126. Page purges (the small allocations every reconcile
/// makes) keep their delay: the CPU per song was the same. Call first thing, before threads;
/// `MIMALLOC_ARENA_PURGE_MULT` in the environment wins.
pub fn purge_freed_segments_at_once() {
    if std::env::var_os("MIMALLOC_ARENA_PURGE_MULT").is_none() {
        // SAFETY: mi_option_set only sets a tunable of mimalloc (harmless when it is not the
        // global allocator).
        unsafe { mi_option_set(MI_OPTION_ARENA_PURGE_MULT, 0) };
    }
}

// mimalloc's own API (libmimalloc-sys, linked for the global allocator): purge what it holds
// unused, now (`force`: every thread's abandoned memory too); set an option. Named here so that
// every binary of the library links it (tests and benches too, which keep the system allocator).
extern crate mimalloc as _;
unsafe extern "C" {
    fn mi_collect(force: bool);
    fn mi_option_set(option: libc::c_int, value: libc::c_long);
}

/// `mi_option_arena_purge_mult` in mimalloc v2's `mi_option_t` (include/mimalloc.h; the
/// libmimalloc-sys crate does not name it).
const MI_OPTION_ARENA_PURGE_MULT: libc::c_int = 24;

/// A mapping of /proc/self/smaps.
#[derive(Debug, PartialEq, Eq)]
struct Mapping {
    start: usize,
    end: usize,
    perms: String,
    path: String,
    /// Resident and private-copied (anonymous) pages, in kB.
    rss_kb: u64,
    anonymous_kb: u64,
}

/// Parse /proc/PID/smaps.
fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut mappings: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
        {
            let perms = fields.next().unwrap_or("").to_string();
            let path = fields.nth(3).unwrap_or("").to_string();
            mappings.push(Mapping { start, end, perms, path, rss_kb: 0, anonymous_kb: 0 });
            continue;
        }
        let kb = || fields.clone().next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        if let Some(m) = mappings.last_mut() {
            match first {
                "Rss:" => m.rss_kb = kb(),
                "Anonymous:" => m.anonymous_kb = kb(),
                _ => {}
            }
        }
    }
    mappings
}

/// The mappings that may be dropped and mapped again from the file without a change: read-only
/// (never writable, so no page was ever copied) mappings of `exe`, with no anonymous page.
fn droppable<'a>(mappings: &'a [Mapping], exe: &str) -> impl Iterator<Item = &'a Mapping> + 'a {
    let exe = exe.to_string();
    mappings
        .iter()
        .filter(move |m| m.path == exe && !m.perms.contains('w') && m.perms.ends_with('p') && m.anonymous_kb == 0 && m.rss_kb > 0)
}

/// Returns the bytes that were resident in the mappings dropped.
#[cfg(target_os = "linux")]
fn drop_clean_code_mappings() -> u64 {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else { return 0 };
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else { return 0 };
    let mappings = parse_smaps(&smaps);
    let mut dropped = 0;
    for m in droppable(&mappings, &exe.to_string_lossy()) {
        // SAFETY: a private, read-only file mapping without copied pages holds exactly the
        // file's contents; MADV_DONTNEED unmaps its pages, and the next access maps the same
        // contents from the page cache again. Nothing in this process is freed or changed.
        let result = unsafe { libc::madvise(m.start as *mut libc::c_void, m.end - m.start, libc::MADV_DONTNEED) };
        if result == 0 {
            dropped += m.rss_kb * 1024;
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5634d5de4000-5634d63ef000 r--p 00000000 fd:01 123 /usr/bin/op
Size:               6188 kB
Rss:                2352 kB
Anonymous:             0 kB
5634d63ef000-5634d77ff000 r-xp 0060a000 fd:01 123 /usr/bin/op
Size:              20544 kB
Rss:               16276 kB
Anonymous:             0 kB
5634d77ff000-5634d78be000 r--p 01a19000 fd:01 123 /usr/bin/op
Size:                764 kB
Rss:                 764 kB
Anonymous:           764 kB
5634d78be000-5634d78c0000 rw-p 01ad7000 fd:01 123 /usr/bin/op
Size:                  8 kB
Rss:                   8 kB
Anonymous:             8 kB
5634ea33c000-5634ea3e2000 rw-p 00000000 00:00 0 [heap]
Size:                664 kB
Rss:                 520 kB
Anonymous:           520 kB
7fc069153000-7fc0692a9000 r-xp 00028000 fd:01 77 /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               1368 kB
Rss:                 948 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_binarys_clean_read_only_mappings_are_dropped() {
        let mappings = parse_smaps(SMAPS);
        assert_eq!(mappings.len(), 6);
        assert_eq!(mappings[1].start, 0x5634d63ef000);
        assert_eq!((mappings[1].rss_kb, mappings[1].anonymous_kb), (16276, 0));
        let dropped: Vec<&str> = droppable(&mappings, "/usr/bin/op").map(|m| m.perms.as_str()).collect();
        // Not the relocated read-only data (copied pages), the data, the heap, or libc.
        assert_eq!(dropped, ["r--p", "r-xp"]);
        assert_eq!(droppable(&mappings, "/usr/bin/op").map(|m| m.rss_kb).sum::<u64>(), 2352 + 16276);
    }
}
