//! Property tests of the on-disk cache's readers (`--cache-dir`, docs/threat-model.md "A cache
//! writer"): owner records, tag records, blobs, signatures records, the key and compiled code,
//! each changed as anyone who can write the volume, a crash mid-write or a disk error would
//! change it, then read through the real caches after a restart. What must hold is in
//! cache_invariants.rs, shared with the cargo-fuzz targets `owner_record` and `cache_entries`.

use std::sync::atomic::{AtomicUsize, Ordering};

use zundoko_operator::supply::cache_shares;
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

use super::{bytes, check};
use crate::cache_invariants::{self as invariants, mutate, scratch};
use crate::draw::Draw;

#[test]
fn an_owner_record_is_believed_only_as_the_operator_writes_it_and_with_its_mac() {
    let believed = AtomicUsize::new(0);
    let cases = 20_000;
    check(cases, bytes(), |bytes| {
        let mut d = Draw::new(&bytes);
        let record = if d.chance(64) { d.rest().to_vec() } else { invariants::owner_record_near_valid(&mut d) };
        invariants::owner_record(&record);
        if cache_shares::parse_record(&record, |label, mac| mac == invariants::fake_mac(label)).is_ok() {
            believed.fetch_add(1, Ordering::Relaxed);
        }
    });
    // Near valid records are drawn often, so what is believed is checked too.
    let believed = believed.into_inner();
    eprintln!("{believed} of {cases} owner records believed");
    assert!(believed >= cases as usize / 50, "only {believed} of {cases} records believed: the invariants were hardly exercised");
}

/// Run a disk property `cases` times on one scratch directory, removed after; the entry it
/// changes must have been served in some cases and refused in others.
fn on_disk(name: &str, cases: u32, property: fn(&std::path::Path, &mut Draw) -> bool) {
    let dir = scratch(name);
    let served = AtomicUsize::new(0);
    check(cases, bytes(), |bytes| {
        if property(&dir, &mut Draw::new(&bytes)) {
            served.fetch_add(1, Ordering::Relaxed);
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    let served = served.into_inner();
    eprintln!("{name}: the entry changed served in {served} of {cases} cases");
    assert!(served > 0 && served < cases as usize, "{name}: the entry served in {served} of {cases} cases: one outcome was never checked");
}

#[test]
fn a_file_is_counted_as_a_tenants_only_by_an_owner_record_that_verifies_for_its_folder_and_name() {
    on_disk("fuzzed-owners", 400, invariants::owner_records_on_disk);
}

#[test]
fn a_tag_record_resolves_to_what_was_put_for_that_tag_or_not_at_all() {
    on_disk("fuzzed-tags", 300, invariants::tag_records_on_disk);
}

#[test]
fn a_blob_is_served_as_put_under_its_digest_or_not_at_all() {
    on_disk("fuzzed-blobs", 300, invariants::blobs_on_disk);
}

#[test]
fn a_signatures_record_is_read_back_as_put_and_never_as_more_than_a_pull_keeps() {
    on_disk("fuzzed-signatures", 300, invariants::signatures_on_disk);
}

/// A component of its own for each name (its code differs).
fn component(export: &str) -> Vec<u8> {
    wat::parse_str(format!("(component (core module (func (export \"{export}\"))))")).expect("a valid component")
}

#[test]
fn compiled_code_is_loaded_only_as_the_operator_wrote_it_for_that_module() {
    let dir = scratch("fuzzed-compiled");
    let _ = std::fs::remove_dir_all(&dir);
    let engine = SandboxEngine::new(SandboxLimits::default()).expect("an engine").with_compiled_cache(&dir).expect("the scratch cache opens");
    let cache = engine.compiled_cache().expect("a compiled cache");
    let (a, b) = (component("the-module-a"), component("another-module-b"));
    // The file the cache writes for each: compiled, then kept with its MAC.
    let kept = |module: &[u8]| {
        assert!(!cache.component(engine.engine(), module).expect("compiles").1, "compiled the first time");
        let hex = zundoko_operator::supply::digest(module).trim_start_matches("sha256:").to_string();
        let files: Vec<_> = std::fs::read_dir(dir.join("compiled"))
            .expect("the compiled folder")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&hex)))
            .collect();
        let [file] = files.try_into().expect("one file for the module");
        let written = std::fs::read(&file).expect("the kept file");
        (file, written)
    };
    let ((a_file, a_written), (_, b_written)) = (kept(&a), kept(&b));
    let loaded = AtomicUsize::new(0);
    check(300, bytes(), |bytes| {
        let mut d = Draw::new(&bytes);
        let now = match d.byte() % 4 {
            0 | 1 => mutate(&a_written, &mut d),
            // The MAC itself damaged.
            2 => {
                let mut now = a_written.clone();
                let at = now.len() - 1 - d.below(32) as usize;
                now[at] ^= 1 << (d.byte() % 8);
                now
            }
            // Another module's code under a's name, with its own MAC or with a's.
            _ if d.chance(128) => b_written.clone(),
            _ => [&b_written[..b_written.len() - 32], &a_written[a_written.len() - 32..]].concat(),
        };
        std::fs::write(&a_file, &now).expect("writing the scratch cache");
        match cache.lookup(engine.engine(), &a) {
            Some(component) => {
                assert!(now == a_written, "code loaded from a file the operator did not write for this module");
                let code = component.serialize().expect("the loaded code");
                assert!(code == a_written[..a_written.len() - 32], "the code loaded is not what was kept");
                loaded.fetch_add(1, Ordering::Relaxed);
            }
            None => assert!(now != a_written, "the file as written, not loaded"),
        }
    });
    assert!(loaded.into_inner() > 0, "no case left the file whole: the loading path was never checked");
    let _ = std::fs::remove_dir_all(&dir);
}
