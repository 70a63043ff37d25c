//! Process figures from /proc that only this benchmark reads (the rest: `common/processes.rs`).

use super::*;

/// The process's proportional set size (kB): each page divided by how many times it is mapped.
/// VmRSS counts a page once per mapping, and an interpreter's warm pool slots each map the
/// pages of its snapshot they read (one copy, in memory and in the Pod's memory cgroup): PSS is
/// what the process holds.
pub(crate) fn pss_kib(pid: &str) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup.lines().find(|l| l.starts_with("Pss:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// Where a process's resident memory is, from /proc/PID/smaps (kB): the main malloc heap,
/// glibc's per-thread arenas (anonymous mappings of at most 64 MiB on a 64 MiB boundary),
/// wasmtime's pool (the one anonymous reservation of more than 1 GiB), other anonymous memory
/// (thread stacks, large allocations) and file-backed pages (the binary's code and data, libc).
pub(crate) fn memory_breakdown(pid: &str) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut heap, mut arenas, mut pool, mut anon, mut file, mut code) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut current: Option<(u64, u64, bool, bool, String)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-').filter(|(a, _)| u64::from_str_radix(a, 16).is_ok()) {
            let (start, end) = (u64::from_str_radix(start, 16).unwrap_or(0), u64::from_str_radix(end, 16).unwrap_or(0));
            let perms = fields.next().unwrap_or("");
            let path = fields.nth(3).unwrap_or("").to_string();
            current = Some((start, end - start, perms.contains('x'), path.starts_with('/'), path));
        } else if first == "Rss:" {
            let kb: u64 = fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
            let Some((start, size, exec, is_file, path)) = &current else { continue };
            if *is_file {
                file += kb;
                if *exec {
                    code += kb;
                }
            } else if path == "[heap]" {
                heap += kb;
            } else if *size > 1 << 30 {
                pool += kb;
            } else if *size <= 64 << 20 && start % (64 << 20) == 0 {
                arenas += kb;
            } else {
                anon += kb;
            }
        }
    }
    format!(
        "heap {:.1}, thread arenas {:.1}, wasm pool {:.1}, other anon {:.1}, file {:.1} (code {:.1}) MiB",
        mib(heap),
        mib(arenas),
        mib(pool),
        mib(anon),
        mib(file),
        mib(code)
    )
}
