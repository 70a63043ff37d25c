//! What a compile leaves in the operator's memory, with the allocator the operator runs with
//! (main.rs: mimalloc, big buffers mapped on their own, process/allocator.rs), not glibc's
//! malloc, so `malloc_trim` has no heap of ours to give back.
//! Measured on the operator itself (release, `zundoko-operator run` against the local API
//! server, its module file swapped from the Rust classic rules to the Python ones, compiled in
//! the child process; docs/benchmarks.md): RSS 21 MiB idle, 82 MiB once the Python module
//! serves (anonymous 63 MiB: its code, 36 MiB, and the instance's), the same anonymous memory
//! with `release_after_compile` or without it, and 6 MiB less of the binary's file pages with it.
//! So this test asserts what production does: the code the compiler child hands back (one
//! buffer of tens of MiB) is returned to the system once dropped (a mapping of its own, the allocator); and
//! `release_after_compile` drops the binary's clean code pages (Cranelift's, after a compile in
//! this process as `check`, `test` and `simulate` do).
//! Alone in its test binary: other tests' threads would allocate and run code while it measures.

use std::io::Read as _;
use std::process::{Command, Stdio};

use zundoko_operator::process::memory::{no_transparent_huge_pages, release_after_compile};

#[global_allocator]
static ALLOCATOR: zundoko_operator::process::allocator::OperatorAllocator = zundoko_operator::process::allocator::OperatorAllocator;

/// Resident bytes of the whole process (/proc/self/statm).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf only reads a constant of the system.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// Resident kB of the binary's read-only mappings that hold no copied page (what a release
/// may drop).
fn clean_code_kb() -> u64 {
    let exe = std::fs::read_link("/proc/self/exe").unwrap().to_string_lossy().into_owned();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut total, mut ours, mut rss, mut anonymous) = (0, false, 0, 0);
    let mut flush = |ours: bool, rss: u64, anonymous: u64| {
        if ours && anonymous == 0 {
            total += rss;
        }
    };
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first().is_some_and(|f| f.contains('-') && !f.ends_with(':')) {
            flush(ours, rss, anonymous);
            let perms = fields.get(1).copied().unwrap_or("");
            ours = fields.get(5) == Some(&exe.as_str()) && !perms.contains('w') && perms.ends_with('p');
            (rss, anonymous) = (0, 0);
            continue;
        }
        match fields.as_slice() {
            ["Rss:", kb, ..] => rss = kb.parse().unwrap_or(0),
            ["Anonymous:", kb, ..] => anonymous = kb.parse().unwrap_or(0),
            _ => {}
        }
    }
    flush(ours, rss, anonymous);
    total
}

#[test]
fn after_a_compile_the_code_buffer_and_the_binarys_clean_code_pages_are_given_back() {
    // As main.rs does first thing: no transparent huge pages (else mimalloc's 2 MiB regions
    // are whole huge pages).
    no_transparent_huge_pages();
    // A compile in this process: Cranelift's code runs, and is resident afterwards.
    let functions: String = (0..200).map(|i| format!("(func (export \"f{i}\") (param i64) (result i64) local.get 0 i64.const {i} i64.mul)")).collect();
    let wasm = wat::parse_str(format!("(module {functions})")).unwrap();
    wasmtime::Module::new(&wasmtime::Engine::default(), wasm).unwrap();

    // A big buffer filled from a pipe and freed after a compile: 40 MiB here, as the code back
    // from the compiler child was before the operator passed it on a piece at a time
    // (CompilerProcess::compile_to); the module's own bytes (18 MB for CPython) and code read
    // whole where no memfd can be made still are such buffers.
    let before = resident_bytes();
    let mut child = Command::new("head").args(["-c", &(40u64 << 20).to_string(), "/dev/zero"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut code = Vec::new();
    child.stdout.take().unwrap().take((640 << 20) + 1).read_to_end(&mut code).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(code.len(), 40 << 20);
    let holding = resident_bytes();
    assert!(holding >= before + (32 << 20), "the buffer is resident while held: {before} -> {holding} bytes");
    drop(std::hint::black_box(code));
    let code_before = clean_code_kb();
    release_after_compile();
    let (after, code_after) = (resident_bytes(), clean_code_kb());
    println!(
        "resident {} KiB before the code buffer, {} KiB holding it, {} KiB after; the binary's clean read-only mappings {code_before} -> {code_after} kB",
        before >> 10,
        holding >> 10,
        after >> 10
    );
    assert!(after <= before + (8 << 20), "the code buffer was not given back: {before} -> {after} bytes resident");
    assert!(code_after * 2 <= code_before, "the clean code pages stayed: {code_before} -> {code_after} kB");
    // And the process works on: the code that runs next is mapped again from the page cache.
    let v: Vec<u64> = (0..1000).collect();
    assert_eq!(v.iter().sum::<u64>(), 499_500);
}
