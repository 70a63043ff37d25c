//! The on-disk cache (`--cache-dir`): compiled code is believed only if the operator wrote it
//! for that module, and the cache stays under `--cache-max-mib` without collecting what serves.
//! Its records of a registry are no verdicts: signatures are verified again at every load with
//! the keys trusted then, and a tag's record is believed only under the operator's MAC (each
//! `check` below is a fresh process: a restart, here with the registry down).

mod common;

use std::path::{Path, PathBuf};

use common::module_bytes;
use zundoko_operator::supply::sandbox::{SandboxEngine, SandboxLimits};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../target/tmp/cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A fresh operator's engine on `dir` (a restart: nothing in memory, the directory as left).
fn restart(dir: &Path) -> SandboxEngine {
    SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(dir).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Every file in `dir/compiled/` named by the module with this digest.
fn compiled_files(dir: &Path, hex: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("compiled"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(hex))
        .collect()
}

#[test]
fn another_modules_code_copied_over_a_modules_name_does_not_run_under_it() {
    let dir = scratch("swap");
    let (a, b) = (module_bytes("zundoko-classic"), module_bytes("zundoko-strict-ja"));
    let engine = restart(&dir);
    let a_name = engine.load(&a).unwrap().info().unwrap().name;
    let b_name = engine.load(&b).unwrap().info().unwrap().name;
    assert_ne!(a_name, b_name);
    // B's compiled file, and whatever vouches for it, under A's name.
    let (a_hex, b_hex) = (hex(&a), hex(&b));
    let a_files = compiled_files(&dir, &a_hex);
    assert!(!a_files.is_empty());
    for file in &a_files {
        std::fs::remove_file(file).unwrap();
    }
    for file in compiled_files(&dir, &b_hex) {
        let name = file.file_name().unwrap().to_string_lossy().replacen(&b_hex, &a_hex, 1);
        std::fs::copy(&file, file.with_file_name(name)).unwrap();
    }
    drop(engine);
    let loaded = restart(&dir).load(&a).unwrap();
    assert_eq!(loaded.info().unwrap().name, a_name, "A's digest runs A's code, not B's");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_compiled_file_whose_mac_is_forged_is_compiled_again_not_run() {
    let dir = scratch("forged");
    let a = module_bytes("zundoko-classic");
    let engine = restart(&dir);
    let cache = engine.compiled_cache().unwrap();
    assert!(!cache.component(engine.engine(), &a).unwrap().1, "compiled the first time");
    assert!(cache.component(engine.engine(), &a).unwrap().1, "and loaded from the cache the second");
    let [file] = compiled_files(&dir, &hex(&a)).try_into().unwrap();
    let written = std::fs::read(&file).unwrap();
    let code = &written[..written.len() - 32];
    // What a writer without the key can make: the code with an unkeyed SHA-256 for its MAC,
    // or an HMAC under a key of its own.
    let unkeyed = {
        use sha2::Digest as _;
        sha2::Sha256::digest(code).to_vec()
    };
    let other_key = {
        use hmac::{KeyInit as _, Mac as _};
        let mut mac = hmac::Hmac::<sha2_011::Sha256>::new_from_slice(&[0u8; 32]).unwrap();
        mac.update(code);
        mac.finalize().into_bytes().to_vec()
    };
    for forged in [unkeyed, other_key] {
        std::fs::write(&file, [code, &forged[..]].concat()).unwrap();
        let engine = restart(&dir);
        let cache = engine.compiled_cache().unwrap();
        assert!(!cache.component(engine.engine(), &a).unwrap().1, "a forged MAC is not believed: compiled again");
        assert_eq!(std::fs::read(&file).unwrap(), written, "and kept again with the operator's own MAC");
        assert!(cache.component(engine.engine(), &a).unwrap().1);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes in the cache's blobs and compiled code.
fn cache_bytes(dir: &Path) -> u64 {
    [dir.join("oci/blobs"), dir.join("compiled")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn the_cache_stays_under_its_bound_across_ten_versions_and_never_collects_what_serves() {
    use std::sync::Arc;
    use zundoko_operator::supply::ModuleLoader;
    use zundoko_operator::supply::contract::plan_check::PlanLimits;
    use zundoko_operator::supply::oci::{Registry, RegistrySettings};
    let dir = scratch("bound");
    let max_mib = 1;
    // As `run` wires it: --cache-max-mib through the registry's settings, what serves from
    // the loader.
    let registry = Registry::new(RegistrySettings { cache_dir: Some(dir.clone()), cache_max_bytes: max_mib << 20, ..RegistrySettings::default() }).unwrap();
    let engine = restart(&dir);
    let disk = engine.compiled_cache().unwrap().disk().clone();
    let loader = Arc::new(ModuleLoader::new(engine, PlanLimits::default()));
    let held = Arc::downgrade(&loader);
    disk.set_in_use(Arc::new(move |digest| held.upgrade().is_some_and(|l| l.serves(digest))));
    let blobs = zundoko_operator::supply::oci::cache::BlobCache::open(&dir).unwrap();
    let versions: Vec<Vec<u8>> = (0..10).map(|n| common::with_custom_section(module_bytes("zundoko-classic"), n)).collect();
    let digest = |bytes: &[u8]| format!("sha256:{}", hex(bytes));
    // Version 0 serves throughout; each later one is pulled, compiled, and dropped when the next comes.
    let serving = loader.load(&versions[0], &digest(&versions[0])).unwrap();
    blobs.put(&digest(&versions[0]), &versions[0]);
    let one = cache_bytes(&dir);
    assert!(3 * one < max_mib << 20 && 10 * one > max_mib << 20, "ten versions ({one} bytes each) overflow {max_mib} MiB, three fit");
    for bytes in &versions[1..] {
        blobs.put(&digest(bytes), bytes);
        let module = loader.load(bytes, &digest(bytes)).unwrap();
        drop(module);
        let held = cache_bytes(&dir);
        assert!(held <= max_mib << 20, "{held} bytes held, over --cache-max-mib {max_mib}");
        // (Looked at, not read: a read would mark it used.)
        assert!(dir.join("oci/blobs").join(hex(&versions[0])).exists(), "the serving module's blob is never collected");
        assert!(!compiled_files(&dir, &hex(&versions[0])).is_empty(), "nor its compiled code");
    }
    // The oldest versions that did not serve were collected; the newest is kept.
    assert!(compiled_files(&dir, &hex(&versions[1])).is_empty() && blobs.get(&digest(&versions[1])).is_none());
    assert!(!compiled_files(&dir, &hex(&versions[9])).is_empty());
    drop((serving, registry));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_cache_dir_the_compiler_process_cache_is_private_and_freshly_named() {
    use std::os::unix::fs::MetadataExt as _;
    let compiler = zundoko_operator::supply::sandbox::compiler_process::CompilerProcess {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_zundoko-operator")),
        max_memory_bytes: 640 << 20,
        timeout: std::time::Duration::from_secs(60),
    };
    let first = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiler_process(compiler.clone()).unwrap();
    let second = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiler_process(compiler).unwrap();
    let (a, b) = (first.compiled_cache().unwrap().disk().root().to_path_buf(), second.compiled_cache().unwrap().disk().root().to_path_buf());
    assert_ne!(a, b, "a fresh name each time, not one derived from the pid");
    for dir in [&a, &b] {
        let meta = std::fs::metadata(dir).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700, "{} is private", dir.display());
        assert_eq!(std::fs::metadata(dir.join("cache.key")).unwrap().mode() & 0o777, 0o600);
        assert!(!dir.file_name().unwrap().to_string_lossy().contains(&std::process::id().to_string()));
    }
    let _ = (std::fs::remove_dir_all(&a), std::fs::remove_dir_all(&b));
}

#[test]
fn a_big_modules_code_comes_back_from_the_compiler_process_and_the_operator_keeps_it_authenticated() {
    let dir = scratch("child");
    // Compiled in the child (every module is), which is not told where the cache is.
    let padding = vec![0u8; 4096];
    let big = zundoko_operator::supply::sandbox::budget::append_custom_section(module_bytes("zundoko-classic"), "zundoko-test-padding", &padding);
    let compiler = zundoko_operator::supply::sandbox::compiler_process::CompilerProcess {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_zundoko-operator")),
        max_memory_bytes: 640 << 20,
        timeout: std::time::Duration::from_secs(120),
    };
    let engine = restart(&dir).with_compiler_process(compiler.clone()).unwrap();
    assert_eq!(engine.load(&big).unwrap().info().unwrap().name, "zundoko-classic");
    let [file] = compiled_files(&dir, &hex(&big)).try_into().unwrap();
    // Kept by the operator with its MAC: a restart loads it without the compiler process.
    let engine = restart(&dir);
    let cache = engine.compiled_cache().unwrap();
    assert!(cache.lookup(engine.engine(), &big).is_some(), "the code the child handed back, kept and authenticated");
    // The child's code with a forged MAC is compiled again, by the child.
    let mut forged = std::fs::read(&file).unwrap();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    std::fs::write(&file, forged).unwrap();
    let engine = restart(&dir).with_compiler_process(compiler).unwrap();
    assert!(engine.compiled_cache().unwrap().lookup(engine.engine(), &big).is_none(), "a forged MAC is not believed");
    assert_eq!(engine.load(&big).unwrap().info().unwrap().name, "zundoko-classic");
    assert!(restart(&dir).compiled_cache().unwrap().lookup(engine.engine(), &big).is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `zundoko-operator check REF --cache-dir DIR [--trusted-keys KEY]` against `registry`: whether
/// it passed, and what it printed (stdout, stderr).
fn check_cached(registry: &str, reference: &str, dir: &Path, key: Option<&Path>) -> (bool, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"));
    command.args(["check", reference, "--cache-dir", dir.to_str().unwrap(), "--registry-timeout-secs", "2"]);
    if let Some(key) = key {
        command.args(["--trusted-keys", key.to_str().unwrap()]);
    }
    let out = command.env("ZUNDOKO_INSECURE_REGISTRIES", registry).env("RUST_LOG", "off").output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_verified_record_is_not_believed_and_kept_signatures_verify_again_with_the_keys_of_now() {
    use zundoko_operator::supply::oci::SignKey;
    let Some(mut registry) = common::registry::TestRegistry::start(false) else { return };
    let dir = scratch("verdicts");
    let (a, b) = (SignKey::generate(), SignKey::generate());
    let keys = registry.dir().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (a_pub, b_pub) = (keys.join("a.pub"), keys.join("b.pub"));
    std::fs::write(&a_pub, a.public_pem()).unwrap();
    std::fs::write(&b_pub, b.public_pem()).unwrap();
    let addr = registry.addr.clone();
    let signed = registry.push("rules/signed:v1", &module_bytes("zundoko-classic"), Some(&a)).await;
    let unsigned = registry.push("rules/unsigned:v1", &module_bytes("zundoko-strict-ja"), None).await;
    let (signed_ref, unsigned_ref) = (format!("{addr}/rules/signed@{signed}"), format!("{addr}/rules/unsigned@{unsigned}"));
    let (ok, out) = check_cached(&addr, &signed_ref, &dir, Some(&a_pub));
    assert!(ok && out.contains("signed by:"), "{out}");
    // The unsigned artifact in the cache too (pulled without keys: nothing verified).
    let (ok, out) = check_cached(&addr, &unsigned_ref, &dir, None);
    assert!(ok, "{out}");

    // What a writer of the cache directory can make of the unsigned artifact's verdict: the
    // "verified by these keys" marker as the cache wrote it (named by the artifact and the keys'
    // fingerprints), and the signed artifact's signatures put under its name.
    let a_trusted = a.trusted("a");
    let set = hex(a_trusted.fingerprint().as_bytes());
    let verified = dir.join("oci/verified");
    std::fs::create_dir_all(&verified).unwrap();
    std::fs::write(verified.join(format!("{}-{}", &unsigned[7..], &set[..16])), "a (forged)").unwrap();
    // (A cache that keeps verdicts, not signatures, has no record to copy; the signed
    // artifact serving from the cache below shows this one keeps them.)
    let signatures = dir.join("oci/signatures");
    if signatures.join(&signed[7..]).exists() {
        // With an owner record that verifies (a file without one is dropped unread): what one
        // who could also read the cache's key would write. The signatures decide.
        use zundoko_operator::supply::disk_cache::{DiskCache, Kept};
        let disk = DiskCache::open(&dir).unwrap();
        std::fs::copy(signatures.join(&signed[7..]), signatures.join(&unsigned[7..])).unwrap();
        disk.own(Kept::Signatures, &unsigned[7..], &zundoko_operator::supply::tenant::Tenant::Cluster).unwrap();
    }

    registry.stop();
    let (ok, out) = check_cached(&addr, &unsigned_ref, &dir, Some(&a_pub));
    assert!(!ok && out.contains("SignatureNotVerified") && out.contains("not this artifact"), "a forged verdict must not be believed: {out}");
    // The signed one serves from the cache with the registry down: its kept signature verifies
    // again with A ...
    let (ok, out) = check_cached(&addr, &signed_ref, &dir, Some(&a_pub));
    assert!(ok && out.contains("from:        the cache") && out.contains("signed by:"), "{out}");
    // ... and not with B only: the keys trusted now, not those of the pull, decide.
    let (ok, out) = check_cached(&addr, &signed_ref, &dir, Some(&b_pub));
    // A verdict, not a registry's passing trouble: refused as not verified.
    assert!(!ok && out.contains("SignatureNotVerified") && out.contains("none of the trusted keys"), "verified with B from a verdict made under A: {out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tag_record_cannot_roll_a_tag_back_while_the_registry_is_down() {
    let Some(mut registry) = common::registry::TestRegistry::start(false) else { return };
    let dir = scratch("tags");
    let addr = registry.addr.clone();
    let old = registry.push("rules/app:stable", &module_bytes("zundoko-classic"), None).await;
    registry.push("rules/app:old", &module_bytes("zundoko-classic"), None).await;
    let (stable, old_ref) = (format!("{addr}/rules/app:stable"), format!("{addr}/rules/app:old"));
    assert!(check_cached(&addr, &stable, &dir, None).0);
    assert!(check_cached(&addr, &old_ref, &dir, None).0);
    // The tag moves on; the cache records where.
    let new = registry.push("rules/app:stable", &module_bytes("zundoko-strict-ja"), None).await;
    assert_ne!(old, new);
    let (ok, out) = check_cached(&addr, &stable, &dir, None);
    assert!(ok && out.contains(&new), "{out}");
    let tag_file = |reference: &str| dir.join("oci/tags").join(hex(reference.as_bytes()));
    let genuine = std::fs::read(tag_file(&stable)).unwrap();

    registry.stop();
    let (ok, out) = check_cached(&addr, &stable, &dir, None);
    assert!(ok && out.contains(&new), "the operator's own record serves with the registry down: {out}");
    assert_eq!(std::fs::read(tag_file(&stable)).unwrap(), genuine, "and stays as it was");
    // Forged: the tag pointed back at the old (still cached) artifact, by a record written by
    // hand, or by another tag's genuine record copied over its name.
    for forged in [format!("{old}\n").into_bytes(), std::fs::read(tag_file(&old_ref)).unwrap()] {
        std::fs::write(tag_file(&stable), forged).unwrap();
        let (ok, out) = check_cached(&addr, &stable, &dir, None);
        assert!(!ok && out.contains("RegistryUnreachable") && !out.contains(&old), "a forged tag record must be ignored: {out}");
        assert!(!tag_file(&stable).exists(), "and dropped by the read that refused it");
    }
    std::fs::write(tag_file(&stable), genuine).unwrap();
    assert!(check_cached(&addr, &stable, &dir, None).0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The attack the cache's predictable temporary names allowed: whoever can make entries in
/// `oci/blobs/` (not read `cache.key`) links the name a write of a 32-byte blob K would use,
/// and the blob's final name, to `../../cache.key`; K published, the operator would have
/// written K into its own key, and a compiled file MAC'd under K would run at the next start.
#[test]
fn a_link_planted_where_a_blob_is_written_is_not_written_through_to_the_key() {
    use zundoko_operator::supply::oci::cache::BlobCache;
    let dir = scratch("links");
    let blobs = BlobCache::open(&dir).unwrap();
    let key_before = std::fs::read(dir.join("cache.key")).unwrap();
    let k = [0x4bu8; 32];
    let digest = format!("sha256:{}", hex(&k));
    // The names the cache wrote through before (`<hex>.tmp-<pid>`, the image's PID 1 and this
    // process's), and the final name itself.
    for name in [format!("{}.tmp-1", &digest[7..]), format!("{}.tmp-{}", &digest[7..], std::process::id()), digest[7..].to_string()] {
        std::os::unix::fs::symlink("../../cache.key", dir.join("oci/blobs").join(name)).unwrap();
    }
    blobs.put(&digest, &k);
    assert_eq!(std::fs::read(dir.join("cache.key")).unwrap(), key_before, "the key was written through a link");
    // The blob is in place as a file of its own (the link at its name replaced, not followed).
    let kept = dir.join("oci/blobs").join(&digest[7..]);
    assert!(std::fs::symlink_metadata(&kept).unwrap().file_type().is_file());
    assert_eq!(blobs.get(&digest).as_deref(), Some(&k[..]));
    // A link at an entry's name is never read through either: a tag record linked to another
    // file is dropped, not believed.
    let reference: zundoko_operator::supply::oci::ModuleRef = "127.0.0.1:5000/rules/ja:v1".parse().unwrap();
    blobs.put_tag(&reference, &digest);
    let record = std::fs::read_dir(dir.join("oci/tags")).unwrap().map(|e| e.unwrap().path()).next().unwrap();
    std::fs::rename(&record, dir.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(dir.join("elsewhere"), &record).unwrap();
    assert_eq!(blobs.tag(&reference), None, "a tag record read through a link");
    assert!(std::fs::symlink_metadata(&record).is_err(), "and the link dropped");
    let _ = std::fs::remove_dir_all(&dir);
}

/// On start every cache folder must be the operator's: the root's mode is made private when
/// the operator owns it; a folder under it that others may write stops the start, named.
#[test]
fn a_cache_folder_others_may_write_stops_the_start_naming_it_and_the_roots_mode_is_made_private() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let dir = scratch("modes");
    drop(restart(&dir));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    drop(restart(&dir));
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700, "the root's mode made private");
    let blobs = dir.join("oci/blobs");
    std::fs::set_permissions(&blobs, std::fs::Permissions::from_mode(0o770)).unwrap();
    let refused = SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&dir).err().expect("a group-writable oci/blobs is refused");
    let said = format!("{refused:#}");
    assert!(said.contains(&blobs.canonicalize().unwrap().display().to_string()) && said.contains("writable by its group or others"), "{said}");
    // The operator's binary refuses to start on it too, naming it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zundoko-operator"))
        .args(["check", "127.0.0.1:1/rules/x:v1", "--cache-dir", dir.to_str().unwrap()])
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("oci/blobs") && said.contains("writable by its group or others"), "{said}");
    std::fs::set_permissions(&blobs, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Owned by another UID (tried where this test may give a folder away: as root).
    if std::fs::metadata(&dir).unwrap().uid() == 0 {
        std::os::unix::fs::chown(&blobs, Some(65534), None).unwrap();
        let refused = format!("{:#}", SandboxEngine::new(SandboxLimits::default()).unwrap().with_compiled_cache(&dir).err().expect("a folder of another UID is refused"));
        assert!(refused.contains("oci/blobs") && refused.contains("owned by UID 65534"), "{refused}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Everything under the cache counts against --cache-max-mib: signature and tag records too,
/// collected least recently used like blobs and code.
#[test]
fn signature_and_tag_records_count_against_the_bound_and_are_collected() {
    use zundoko_operator::supply::oci::signature::Found;
    use zundoko_operator::supply::oci::cache::BlobCache;
    let dir = scratch("records");
    let blobs = BlobCache::open(&dir).unwrap();
    blobs.disk().set_max_bytes(1 << 20);
    // 40 artifacts' signature records of 100 KiB each (4 MiB), and 300 tag records (a block
    // each on disk).
    let payload = vec![b'p'; 75 << 10];
    for n in 0..40u32 {
        let digest = format!("sha256:{}", hex(&n.to_be_bytes()));
        blobs.put_signatures(&digest, &[Found { payload: payload.clone(), signature: "c2ln".into() }]);
        assert!(all_bytes(&dir) <= 1 << 20, "{} bytes after {n} records, over the bound of 1 MiB", all_bytes(&dir));
    }
    for n in 0..300u32 {
        let reference: zundoko_operator::supply::oci::ModuleRef = format!("127.0.0.1:5000/rules/app:v{n}").parse().unwrap();
        blobs.put_tag(&reference, &format!("sha256:{}", hex(&n.to_be_bytes())));
    }
    assert!(all_bytes(&dir) <= 1 << 20, "{} bytes, over the bound of 1 MiB", all_bytes(&dir));
    let signatures = std::fs::read_dir(dir.join("oci/signatures")).unwrap().count();
    assert!(signatures < 40, "no signature record collected ({signatures} kept)");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bytes every file under the cache takes on disk (what an emptyDir's sizeLimit measures).
fn all_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    ["oci/blobs", "oci/tags", "oci/signatures", "compiled"]
        .iter()
        .flat_map(|d| std::fs::read_dir(dir.join(d)).unwrap())
        .map(|e| e.unwrap().metadata().unwrap())
        .map(|m| m.len().max(m.blocks() * 512))
        .sum()
}

/// A compile whose code would not fit what the bound leaves is refused by name, not kept.
#[test]
fn a_compile_whose_code_does_not_fit_the_caches_room_is_refused_as_cache_full() {
    let dir = scratch("room");
    let compiler = zundoko_operator::supply::sandbox::compiler_process::CompilerProcess {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_zundoko-operator")),
        max_memory_bytes: 640 << 20,
        timeout: std::time::Duration::from_secs(120),
    };
    let module = module_bytes("zundoko-classic");
    let engine = restart(&dir).with_compiler_process(compiler).unwrap();
    engine.compiled_cache().unwrap().disk().set_max_bytes(64 << 10);
    let refused = engine.load(&module).err().expect("64 KiB cannot hold the module's code");
    assert_eq!(refused.reason(), "CacheFull", "{refused}");
    assert!(refused.to_string().contains("--cache-max-mib"), "{refused}");
    assert!(compiled_files(&dir, &hex(&module)).is_empty(), "nothing kept");
    engine.compiled_cache().unwrap().disk().set_max_bytes(64 << 20);
    assert_eq!(engine.load(&module).unwrap().info().unwrap().name, "zundoko-classic");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whose each cached file is survives a restart (`supply/cache_shares.rs`): a tenant's file
/// counts against that tenant's part, and a file whose owner record does not verify is dropped,
/// never counted as the cluster's.
#[test]
fn a_files_owner_survives_a_restart_and_a_file_whose_owner_record_does_not_verify_is_dropped() {
    use std::collections::HashMap;
    use std::io::Write as _;
    use zundoko_operator::supply::disk_cache::{DiskCache, Kept};
    use zundoko_operator::supply::tenant::Tenant;
    let dir = scratch("owners");
    let a = Tenant::Namespace("team-a".into());
    let put = |cache: &DiskCache, name: &str, tenant: &Tenant| {
        let mut made = cache.folder(Kept::Blobs).create_new().unwrap();
        made.file.write_all(&[1u8; 5000]).unwrap();
        cache.own(Kept::Blobs, name, tenant).unwrap();
        made.publish(name).unwrap();
        cache.collect((Kept::Blobs, name), tenant);
    };
    let usage = |cache: &DiskCache| cache.usage().into_iter().collect::<HashMap<_, _>>();
    let each = {
        let cache = DiskCache::open(&dir).unwrap();
        for (name, tenant) in [("a-module", &a), ("b-module", &Tenant::Namespace("team-b".into())), ("cluster-module", &Tenant::Cluster), ("c-module", &Tenant::Namespace("team-c".into()))] {
            put(&cache, name, tenant);
        }
        usage(&cache)[&Tenant::Cluster]
    };
    // Restarted: a new cache over the same directory counts a's file as a's.
    let cache = DiskCache::open(&dir).unwrap();
    let used = usage(&cache);
    assert_eq!((used.get(&a), used.get(&Tenant::Cluster)), (Some(&each), Some(&each)), "{used:?}");
    drop(cache);

    // Tampered records: the cluster's record copied over a's (a genuine MAC, for another
    // file); b's relabelled `_cluster` keeping its MAC; c's over its cap. None is believed:
    // each file is dropped, and the cluster keeps only its own.
    let records = dir.join("owners");
    std::fs::copy(records.join("blobs-cluster-module"), records.join("blobs-a-module")).unwrap();
    let b_record = std::fs::read_to_string(records.join("blobs-b-module")).unwrap();
    std::fs::write(records.join("blobs-b-module"), b_record.replacen("team-b", "_cluster", 1)).unwrap();
    std::fs::write(records.join("blobs-c-module"), vec![b'a'; zundoko_operator::supply::cache_shares::MAX_OWNER_RECORD as usize + 1]).unwrap();
    let cache = DiskCache::open(&dir).unwrap();
    let used = usage(&cache);
    assert_eq!(used, HashMap::from([(Tenant::Cluster, each)]), "only the cluster's own file is the cluster's");
    for name in ["a-module", "b-module", "c-module"] {
        assert!(!dir.join("oci/blobs").join(name).exists(), "{name} dropped");
    }
    // A file with no record at all (put there by another, or from before records): dropped.
    std::fs::write(dir.join("oci/blobs/planted"), [2u8; 100]).unwrap();
    assert_eq!(usage(&cache), HashMap::from([(Tenant::Cluster, each)]));
    assert!(!dir.join("oci/blobs/planted").exists());
    drop(cache);
    let _ = std::fs::remove_dir_all(&dir);
}
