//! What must hold of the on-disk cache's readers (`--cache-dir`) whatever its files hold: each
//! reader refuses an entry (not served, not believed, dropped) or returns exactly what was put,
//! and never panics. Shared by path with the cargo-fuzz targets (fuzz/), which choose the bytes
//! for far longer; the property tests (cache.rs) choose them from a fixed seed.
//!
//! The entries are written and read through the real caches (`DiskCache`, `BlobCache`) on a
//! scratch directory, changed between as a crash, a disk error or anyone who can write the
//! volume would change them: a bit flipped, cut short, grown, a stretch overwritten, any bytes
//! at all, another entry's record or file under this one's name, an entry renamed with its
//! record. Each check reopens the cache first (a restart: nothing of the entries in memory),
//! and says whether the entry changed was still served (so a property can tell that it met
//! both outcomes).

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use zundoko_operator::supply::cache_files::TEMP_PREFIX;
use zundoko_operator::supply::cache_shares::{self, BadOwnerRecord};
use zundoko_operator::supply::digest::digest;
use zundoko_operator::supply::disk_cache::{DiskCache, KEY_FILE, Kept};
use zundoko_operator::supply::oci::ModuleRef;
use zundoko_operator::supply::oci::cache::{BlobCache, MAX_KEPT_SIGNATURES};
use zundoko_operator::supply::oci::signature::Found;
use zundoko_operator::supply::tenant::Tenant;

use crate::draw::Draw;

/// The cache's folders and their names in owner records (`Kept::label`).
pub const FOLDERS: [(Kept, &str); 4] = [(Kept::Blobs, "blobs"), (Kept::Tags, "tags"), (Kept::Signatures, "signatures"), (Kept::Compiled, "compiled")];

/// A scratch directory for one property or fuzz run: on a tmpfs when there is one (every entry
/// written is synced), else under the system's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    base.join(format!("zundoko-{name}-{}", std::process::id()))
}

/// `dir` emptied, to be made again by the next open.
fn fresh(dir: &Path) {
    if let Err(error) = std::fs::remove_dir_all(dir) {
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "cannot empty the scratch cache {}: {error}", dir.display());
    }
}

/// `valid` changed as a crash, a disk error or a hand would change it. Most changes are small,
/// so that a reader's every check, not only its first, meets them.
pub fn mutate(valid: &[u8], d: &mut Draw) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    let len = bytes.len();
    match d.byte() % 7 {
        0 if len > 0 => {
            let at = d.place(len);
            bytes[at] ^= 1 << (d.byte() % 8);
        }
        1 => bytes.truncate(d.place(len + 1)),
        2 => {
            let more = d.below(80) as usize;
            bytes.extend((0..more).map(|_| d.byte()));
        }
        3 if len > 0 => {
            // A stretch overwritten (a torn write), with tricky bytes now and then.
            let at = d.place(len);
            let end = len.min(at + 1 + d.below(40) as usize);
            for byte in &mut bytes[at..end] {
                let any = d.byte();
                *byte = d.pick(&[any, b' ', b'\n', b'\r', b'\t', b'0', b'f', b'F', 0, 0xff]);
            }
        }
        4 => {
            let at = d.place(len + 1);
            let what = d.pick(&[b' ', b'\n', b'\r', b'\t', 0, b'a']);
            bytes.insert(at, what);
        }
        5 => bytes = d.rest().to_vec(),
        _ => {}
    }
    bytes
}

/// What a fuzzer's verifier accepts: a MAC derived from the label (no key: the parser's
/// invariants are about how it uses the verifier's answer, not about HMAC).
pub fn fake_mac(label: &[u8]) -> [u8; 32] {
    [label.len() as u8 ^ 0x5a; 32]
}

/// An owner record parsed from any bytes, its MAC checked by a verifier that accepts exactly
/// [`fake_mac`]: a tenant only if its MAC was checked for the label it names and held, and
/// only from the one canonical text the operator writes (so no two files' records can differ
/// and both verify); a refusal that is not about the MAC never asks the verifier.
pub fn owner_record(bytes: &[u8]) {
    let mut asked = None;
    let parsed = cache_shares::parse_record(bytes, |label, mac| {
        let holds = mac == fake_mac(label);
        asked = Some((label.to_vec(), mac.to_vec(), holds));
        holds
    });
    match (&parsed, &asked) {
        (Ok(tenant), Some((label, mac, true))) => {
            assert_eq!(label, tenant.label().as_bytes(), "the MAC checked is not over the label believed");
            assert_eq!(bytes, cache_shares::record_text(tenant, mac).as_bytes(), "a record believed that the operator never writes");
        }
        (Ok(tenant), _) => panic!("{tenant:?} believed without its MAC holding: {asked:?}"),
        (Err(BadOwnerRecord::NotOurs), Some((_, _, false))) => {}
        (Err(BadOwnerRecord::NotOurs), _) => panic!("NotOurs without the MAC refused: {asked:?}"),
        (Err(BadOwnerRecord::Malformed | BadOwnerRecord::NoTenant(_)), None) => {}
        (Err(why), Some(_)) => panic!("{why}, yet the MAC was checked first"),
    }
    if let Err(BadOwnerRecord::NoTenant(quoted)) = &parsed {
        assert!(quoted.len() <= 64 && !quoted.chars().any(char::is_control), "a refusal quotes the label unbounded or raw: {quoted:?}");
    }
}

/// An owner record drawn near the operator's own: a valid text for a drawn tenant and a MAC
/// the [`fake_mac`] verifier accepts (or any), then [`mutate`]d.
pub fn owner_record_near_valid(d: &mut Draw) -> Vec<u8> {
    let tenant = match d.byte() % 4 {
        0 => Tenant::Cluster,
        1 => Tenant::Namespace("team-a".into()),
        2 => Tenant::Namespace("a".repeat(63)),
        _ => Tenant::Namespace(d.text(70)),
    };
    let mac = if d.chance(200) { fake_mac(tenant.label().as_bytes()) } else { [d.byte(); 32] };
    mutate(cache_shares::record_text(&tenant, &mac).as_bytes(), d)
}

/// One entry of `kept` made as the cache makes it: its owner recorded, then put in place.
fn put(cache: &DiskCache, kept: Kept, name: &str, bytes: &[u8], tenant: &Tenant) {
    let mut made = cache.folder(kept).create_new().expect("a new file in the scratch cache");
    made.file.write_all(bytes).expect("writing the scratch cache");
    cache.own(kept, name, tenant).expect("recording an owner in the scratch cache");
    made.publish(name).expect("publishing in the scratch cache");
}

fn on_disk(path: &Path) -> u64 {
    let meta = std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    meta.len().max(meta.blocks() * 512)
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

fn rename(from: &Path, to: &Path) {
    std::fs::rename(from, to).unwrap_or_else(|e| panic!("renaming {} to {}: {e}", from.display(), to.display()));
}

/// Two entries owned by two tenants, then a's owner record (or its file's place, or the key)
/// changed; after a restart, every file left in the four folders has an owner record that
/// verifies for its folder and name under the key, and is counted as that record's tenant
/// (`usage`), byte for byte; a file whose record does not verify is gone. Nothing changed: a's
/// and b's files are still theirs.
pub fn owner_records_on_disk(dir: &Path, d: &mut Draw) -> bool {
    fresh(dir);
    let a = Tenant::Namespace("team-a".into());
    let b = if d.chance(128) { Tenant::Cluster } else { Tenant::Namespace("team-b".into()) };
    let ((kept_a, folder_a), (kept_b, folder_b)) = (d.pick(&FOLDERS), d.pick(&FOLDERS));
    let key = dir.join(KEY_FILE);
    {
        let cache = DiskCache::open(dir).expect("the scratch cache opens");
        put(&cache, kept_a, "entry-a", b"a's entry", &a);
        put(&cache, kept_b, "entry-b", b"b's entry, longer", &b);
    }
    let owners = dir.join("owners");
    let record_a = owners.join(cache_shares::record_name(folder_a, "entry-a"));
    let record_b = owners.join(cache_shares::record_name(folder_b, "entry-b"));
    let path_of = |folder: &str, name: &str| if folder == "compiled" { dir.join(folder).join(name) } else { dir.join("oci").join(folder).join(name) };
    let (mut a_untouched, mut b_untouched) = (false, true);
    // What must be gone after the restart, by folder and name (every file: the key changed).
    let mut gone = vec![(folder_a, "entry-a")];
    let mut key_changed = false;
    match d.byte() % 8 {
        0..=2 => {
            let was = std::fs::read(&record_a).expect("a's owner record");
            let now = mutate(&was, d);
            a_untouched = now == was;
            if a_untouched {
                gone.clear();
            }
            write(&record_a, &now);
        }
        // Another entry's record, genuine, over a's.
        3 => write(&record_a, &std::fs::read(&record_b).expect("b's owner record")),
        // a's record naming b, a's MAC kept.
        4 => {
            let was = std::fs::read_to_string(&record_a).expect("a's owner record");
            write(&record_a, was.replacen(a.label(), b.label(), 1).as_bytes());
        }
        // a's file and record renamed to another name, in its folder or another.
        5 | 6 => {
            let (_, to_folder) = d.pick(&FOLDERS);
            let name = d.pick(&["entry-c", "entry-b", "entry-a"]);
            if to_folder == folder_a && name == "entry-a" {
                a_untouched = true;
                gone.clear();
            } else {
                gone.push((to_folder, name));
                // Over b's own file and record: b's entry is a's now, under b's name.
                b_untouched = !(to_folder == folder_b && name == "entry-b");
                rename(&path_of(folder_a, "entry-a"), &path_of(to_folder, name));
                rename(&record_a, &owners.join(cache_shares::record_name(to_folder, name)));
            }
        }
        // The key changed: every record made under it no longer verifies.
        _ => {
            let was = std::fs::read(&key).expect("the cache's key");
            let now = mutate(&was, d);
            (a_untouched, b_untouched, key_changed) = (now == was, now == was, now != was);
            gone.clear();
            write(&key, &now);
        }
    }
    let cache = DiskCache::open(dir).expect("the scratch cache opens again");
    let used: std::collections::BTreeMap<Tenant, u64> = cache.usage().into_iter().collect();
    let mut owned = std::collections::BTreeMap::<Tenant, u64>::new();
    let mut kept_files = Vec::new();
    for (kept, folder) in FOLDERS {
        for entry in std::fs::read_dir(path_of(folder, "")).expect("a cache folder") {
            let name = entry.expect("a cache folder's entry").file_name().to_string_lossy().into_owned();
            if name.starts_with(TEMP_PREFIX) {
                continue;
            }
            let record = owners.join(cache_shares::record_name(folder, &name));
            let text = std::fs::read(&record).unwrap_or_else(|e| panic!("{folder}/{name} kept without its owner record: {e}"));
            let label = text.split(|&c| c == b' ').next().unwrap_or_default();
            let owner = std::str::from_utf8(label).ok().and_then(Tenant::from_label).unwrap_or_else(|| panic!("{folder}/{name} kept with a record naming no tenant: {text:?}"));
            let mac = cache.tag(&cache_shares::record_context(folder, &name), owner.label().as_bytes());
            assert_eq!(text, cache_shares::record_text(&owner, &mac).as_bytes(), "{folder}/{name} kept with a record that does not verify for it");
            *owned.entry(owner.clone()).or_default() += on_disk(&path_of(folder, &name)) + on_disk(&record);
            assert!(!key_changed && !gone.contains(&(folder, name.as_str())), "{folder}/{name} kept after its record, place or the key changed (owner {owner:?})");
            kept_files.push((kept, name, owner));
        }
    }
    assert_eq!(used, owned, "the bytes counted by tenant are not those of the records that verify ({kept_files:?})");
    let has = |kept: Kept, name: &str, owner: &Tenant| kept_files.iter().any(|(k, n, o)| (*k, n.as_str(), o) == (kept, name, owner));
    if a_untouched {
        assert!(has(kept_a, "entry-a", &a), "a's entry, untouched, lost or not a's: {kept_files:?}");
    }
    if b_untouched {
        assert!(has(kept_b, "entry-b", &b), "b's entry, untouched, lost or not b's: {kept_files:?}");
    }
    has(kept_a, "entry-a", &a)
}

/// A tag record's file name: the SHA-256 of the tag's full name (`BlobCache::tag_file`).
fn tag_file(reference: &ModuleRef) -> String {
    let full = reference.with_tag(reference.tag.as_deref().unwrap_or("latest")).to_string();
    digest(full.as_bytes()).trim_start_matches("sha256:").to_string()
}

/// Two tags recorded, then the first's record changed (or another's put in its place, or it
/// renamed to a third tag's name with an owner record that verifies there): after a restart
/// the first resolves to its own digest or to nothing, the second to its own, the third to
/// nothing.
pub fn tag_records_on_disk(dir: &Path, d: &mut Draw) -> bool {
    fresh(dir);
    let parse = |r: &str| r.parse::<ModuleRef>().expect("a valid reference");
    let (one, two, three) = (parse("127.0.0.1:5000/rules/ja:v1"), parse("127.0.0.1:5000/rules/ja:v2"), parse("127.0.0.1:5000/rules/other"));
    let (first, second) = (digest(b"the first module"), digest(b"the second module"));
    let tags = dir.join("oci/tags");
    let mut untouched = false;
    {
        let cache = BlobCache::open(dir).expect("the scratch cache opens");
        cache.put_tag(&one, &first);
        cache.put_tag(&two, &second);
        let record = tags.join(tag_file(&one));
        match d.byte() % 4 {
            0 | 1 => {
                let was = std::fs::read(&record).expect("the first tag's record");
                let now = mutate(&was, d);
                untouched = now == was;
                write(&record, &now);
            }
            2 => write(&record, &std::fs::read(tags.join(tag_file(&two))).expect("the second tag's record")),
            _ => {
                cache.disk().own(Kept::Tags, &tag_file(&three), &Tenant::Cluster).expect("an owner record");
                rename(&record, &tags.join(tag_file(&three)));
            }
        }
    }
    let cache = BlobCache::open(dir).expect("the scratch cache opens again");
    let resolved = cache.tag(&one);
    assert!(resolved.is_none() || resolved.as_ref() == Some(&first), "the first tag resolves to {resolved:?}, not its own {first}");
    if untouched {
        assert_eq!(resolved, Some(first), "the first tag's record, untouched, not believed");
    }
    assert_eq!(cache.tag(&two), Some(second), "the second tag's record, untouched, not believed");
    assert_eq!(cache.tag(&three), None, "a tag never recorded resolves");
    resolved.is_some()
}

/// Two blobs kept, then the first's file changed (or the second's put in its place, or it
/// renamed to a third digest's name, with an owner record that verifies there): the first is
/// served exactly as put or not at all (and then dropped), the second as put, the third never.
pub fn blobs_on_disk(dir: &Path, d: &mut Draw) -> bool {
    fresh(dir);
    let first: Vec<u8> = (0..d.below(200)).map(|_| d.byte()).collect();
    let second = b"the second blob".to_vec();
    let (first_digest, second_digest, third_digest) = (digest(&first), digest(&second), digest(b"never kept"));
    let hex = |digest: &str| digest.trim_start_matches("sha256:").to_string();
    let blobs = dir.join("oci/blobs");
    let file = blobs.join(hex(&first_digest));
    let mut untouched = false;
    {
        let cache = BlobCache::open(dir).expect("the scratch cache opens");
        cache.put(&first_digest, &first);
        cache.put(&second_digest, &second);
        match d.byte() % 4 {
            0 | 1 => {
                let now = mutate(&first, d);
                untouched = now == first;
                write(&file, &now);
            }
            2 => {
                untouched = first == second;
                write(&file, &second);
            }
            _ => {
                cache.disk().own(Kept::Blobs, &hex(&third_digest), &Tenant::Cluster).expect("an owner record");
                rename(&file, &blobs.join(hex(&third_digest)));
            }
        }
    }
    let cache = BlobCache::open(dir).expect("the scratch cache opens again");
    let served = cache.get(&first_digest);
    match &served {
        Some(served) => assert!(*served == first, "a blob served that is not what was put under its digest"),
        None => {
            assert!(!untouched, "the first blob, untouched, not served");
            assert!(!file.exists(), "a blob refused is left in place");
        }
    }
    assert_eq!(cache.get(&second_digest), Some(second), "the second blob, untouched, not served");
    assert_eq!(cache.get(&third_digest), None, "a blob under another's digest served");
    served.is_some()
}

/// A signatures record written by hand: `count` entries, each well formed.
fn signatures_record(count: usize) -> Vec<u8> {
    let entries: Vec<serde_json::Value> = (0..count).map(|i| serde_json::json!({ "payload": "", "signature": format!("c2ln{i}") })).collect();
    serde_json::to_vec(&entries).expect("a record serializes")
}

/// Signatures kept for an artifact, then their record changed (or replaced by a well-formed
/// one of any length, or another artifact's): what is read back is never more than a pull
/// keeps (each is verified again, one ECDSA verification each), and, untouched, exactly the
/// first [`MAX_KEPT_SIGNATURES`] put.
pub fn signatures_on_disk(dir: &Path, d: &mut Draw) -> bool {
    fresh(dir);
    let artifact = digest(b"an artifact");
    let put: Vec<(Vec<u8>, String)> = (0..d.below(7)).map(|i| (format!("payload {i}").into_bytes(), format!("c2lnbmF0dXJl{i}"))).collect();
    let found = |put: &[(Vec<u8>, String)]| put.iter().map(|(payload, signature)| Found { payload: payload.clone(), signature: signature.clone() }).collect::<Vec<_>>();
    let record = dir.join("oci/signatures").join(artifact.trim_start_matches("sha256:"));
    let untouched;
    {
        let cache = BlobCache::open(dir).expect("the scratch cache opens");
        cache.put_signatures(&artifact, &found(&put));
        let was = std::fs::read(&record).expect("the signatures record");
        let now = match d.byte() % 4 {
            0 | 1 => mutate(&was, d),
            2 => signatures_record(d.below(64) as usize),
            _ => {
                let other = digest(b"another artifact");
                cache.put_signatures(&other, &found(&[(b"another's".to_vec(), "b3RoZXI=".into())]));
                std::fs::read(dir.join("oci/signatures").join(other.trim_start_matches("sha256:"))).expect("another record")
            }
        };
        untouched = now == was;
        write(&record, &now);
    }
    let cache = BlobCache::open(dir).expect("the scratch cache opens again");
    let read = cache.signatures(&artifact).map(|found| found.into_iter().map(|f| (f.payload, f.signature)).collect::<Vec<_>>());
    if let Some(read) = &read {
        assert!(read.len() <= MAX_KEPT_SIGNATURES, "{} signatures read back to be verified, more than the {MAX_KEPT_SIGNATURES} a pull keeps", read.len());
    }
    if untouched {
        let kept = put.iter().take(MAX_KEPT_SIGNATURES).cloned().collect::<Vec<_>>();
        assert_eq!(read, Some(kept), "the record, untouched, not read back as put");
    }
    read.is_some()
}
