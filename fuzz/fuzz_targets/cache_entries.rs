//! The on-disk cache's entries (`--cache-dir`) changed in any way between a write and a
//! restart, read through the real caches on a scratch directory: owner records (and the key),
//! tag records, blobs, signatures records. Compiled code is left to the property test
//! (`host/tests/fuzzed_boundaries/cache.rs`): each input would compile.
#![no_main]
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/draw.rs"]
mod draw;
#[allow(dead_code)]
#[path = "../../host/tests/fuzzed_boundaries/cache_invariants.rs"]
mod cache_invariants;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut d = draw::Draw::new(data);
    let dir = cache_invariants::scratch("fuzz-cache-entries");
    // Whether the entry changed was still served: the property tests count it, not the fuzzer.
    let _served = match d.byte() % 4 {
        0 => cache_invariants::owner_records_on_disk(&dir, &mut d),
        1 => cache_invariants::tag_records_on_disk(&dir, &mut d),
        2 => cache_invariants::blobs_on_disk(&dir, &mut d),
        _ => cache_invariants::signatures_on_disk(&dir, &mut d),
    };
});
