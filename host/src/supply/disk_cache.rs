//! What the on-disk cache (`--cache-dir DIR`) shares between pulled blobs and the records of a
//! registry (`oci/cache.rs`: `DIR/oci/blobs/`, `tags/`, `signatures/`) and compiled code
//! (`sandbox/compiled_cache.rs`, `DIR/compiled/`):
//! - its folders, held open (`cache_files.rs`): every one the operator's own, or the start is
//!   refused naming it;
//! - whose each file is (`DIR/owners/`, `cache_shares.rs`): a record written before the file is
//!   put in place, read back at start; a file without one that verifies is dropped;
//! - its bound, `--cache-max-mib`: after every write, every file in those four folders counts
//!   (the key, the owner records and writes in flight too), and the least recently used (by modification time,
//!   which a read sets) are removed until they fit, except what serves now (the loader says
//!   which digests; with a serving module its manifest, its tag's record and its signatures)
//!   and the entry just written;
//! - the key compiled code is authenticated with (HMAC-SHA256): `DIR/cache.key`, 32 random
//!   bytes made by the operator (0600, linked into place so no reader sees half of it)
//!   before any compiler process runs, and never handed to one. A key file not the operator's
//!   own (another owner, readable by others, not 32 bytes, a link, a file with another name
//!   too) is replaced, so what it authenticated is compiled again.
//!
//! One `DiskCache` per directory in a process: the blob cache and the compiled cache of one
//! directory share it (its bound, its key, what serves).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use hmac::{KeyInit as _, Mac as _};

use crate::supply::cache_files::{Folder, TEMP_PREFIX};
use crate::supply::cache_shares::{self, Owners, Weighed};
use crate::supply::tenant::Tenant;

/// `--cache-max-mib`'s default: two versions of an interpreter's module (a CPython component:
/// an 18 MB blob and 35 MiB of code each) with room, well under deploy/'s emptyDir of 256Mi.
pub const DEFAULT_MAX_MIB: u64 = 128;
pub const KEY_FILE: &str = "cache.key";
const KEY_BYTES: usize = 32;
pub const MAC_BYTES: usize = 32;
/// A write's temporary file older than this is a crashed write's: collected.
const STALE_TMP: Duration = Duration::from_secs(600);

/// Whether the module with this digest (`sha256:<hex>`) serves now.
pub type InUse = Arc<dyn Fn(&str) -> bool + Send + Sync>;

type HmacSha256 = hmac::Hmac<sha2_011::Sha256>;

/// [`DiskCache::mac_in_pieces`]: the body's pieces in order, then the tag to check.
pub struct MacInPieces(HmacSha256);

impl MacInPieces {
    pub fn update(&mut self, piece: &[u8]) {
        self.0.update(piece);
    }

    /// Whether `tag` is the MAC of the pieces given (compared in constant time).
    pub fn verify(self, tag: &[u8]) -> bool {
        self.0.verify_slice(tag).is_ok()
    }

    /// The MAC of the pieces given, to write after them.
    pub fn tag(self) -> [u8; MAC_BYTES] {
        self.0.finalize().into_bytes().into()
    }
}

/// The folders of the cache, each holding one kind of entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// `oci/blobs/`: manifests and layers, by digest.
    Blobs,
    /// `oci/tags/`: the digest each tag last resolved to.
    Tags,
    /// `oci/signatures/`: the signatures that verified, by artifact.
    Signatures,
    /// `compiled/`: compiled code, by module digest and engine.
    Compiled,
}

const KEPT: [Kept; 4] = [Kept::Blobs, Kept::Tags, Kept::Signatures, Kept::Compiled];

impl Kept {
    /// The folder's name, as owner records name it.
    fn label(self) -> &'static str {
        match self {
            Kept::Blobs => "blobs",
            Kept::Tags => "tags",
            Kept::Signatures => "signatures",
            Kept::Compiled => "compiled",
        }
    }
}

/// A tag's record is a digest and a MAC: never more than this.
pub const MAX_TAG_RECORD: u64 = 256;
/// A manifest is never more than this (a bigger blob is a layer).
const MAX_MANIFEST: u64 = 256 << 10;

pub struct DiskCache {
    root: Folder,
    blobs: Folder,
    tags: Folder,
    signatures: Folder,
    compiled: Folder,
    /// `owners/`: whose each file is, a record each (`cache_shares.rs`).
    owner_records: Folder,
    key: [u8; KEY_BYTES],
    max_bytes: AtomicU64,
    in_use: RwLock<Option<InUse>>,
    collecting: Mutex<()>,
    warned_full: AtomicBool,
    /// Whose each file is (`cache_shares.rs`).
    owners: Owners,
}

static OPEN: Mutex<Vec<(PathBuf, Weak<DiskCache>)>> = Mutex::new(Vec::new());

/// Create `dir` (and its parents) private to the operator: 0700.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// A fresh private directory under the system's temporary directory (mkdtemp: 0700, a name
/// no one can create first), for a cache nobody named.
pub fn private_temp_dir(prefix: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let template = std::env::temp_dir().join(format!("{prefix}XXXXXX"));
    let mut template = std::ffi::CString::new(template.as_os_str().as_bytes()).map_err(std::io::Error::other)?.into_bytes_with_nul();
    // SAFETY: a NUL-terminated, writable template ending in XXXXXX, as mkdtemp wants.
    if unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) }.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    template.pop();
    Ok(PathBuf::from(std::ffi::OsString::from(std::ffi::OsStr::from_bytes(&template))))
}

/// One file in the cache's folders, as a collection sees it.
struct Entry {
    kept: Kept,
    name: String,
    size: u64,
    modified: i64,
    owner: Tenant,
}

/// What a file takes on disk (a small file takes a block; what the kubelet's sizeLimit
/// measures), or its length if more (a sparse file).
fn on_disk(st: &libc::stat) -> u64 {
    (st.st_size.max(0) as u64).max(st.st_blocks.max(0) as u64 * 512)
}

impl DiskCache {
    /// The cache of `root` (created 0700 if missing), its folders checked (the operator's own,
    /// or refused naming the folder) and its key read or made now.
    pub fn open(root: &Path) -> Result<Arc<DiskCache>, String> {
        create_private_dir(root).map_err(|e| format!("cannot create the cache directory {}: {e}", root.display()))?;
        let root = root.canonicalize().map_err(|e| format!("cannot open the cache directory {}: {e}", root.display()))?;
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, cache)| cache.strong_count() > 0);
        if let Some(cache) = open.iter().find(|(path, _)| *path == root).and_then(|(_, cache)| cache.upgrade()) {
            return Ok(cache);
        }
        let refused = |e: crate::supply::cache_files::FolderRefused| e.to_string();
        let top = Folder::open_root(&root).map_err(refused)?;
        let oci = top.sub("oci").map_err(refused)?;
        let (blobs, tags, signatures) = (oci.sub("blobs").map_err(refused)?, oci.sub("tags").map_err(refused)?, oci.sub("signatures").map_err(refused)?);
        let compiled = top.sub("compiled").map_err(refused)?;
        let owner_records = top.sub("owners").map_err(refused)?;
        let key = load_or_make_key(&top).map_err(|e| format!("cannot make the cache's key in {}: {e}", root.display()))?;
        let cache = Arc::new(DiskCache {
            root: top,
            blobs,
            tags,
            signatures,
            compiled,
            owner_records,
            key,
            max_bytes: AtomicU64::new(DEFAULT_MAX_MIB << 20),
            in_use: RwLock::new(None),
            collecting: Mutex::new(()),
            warned_full: AtomicBool::new(false),
            owners: Owners::default(),
        });
        open.push((root, Arc::downgrade(&cache)));
        // Whose each file found is, from its owner record; one without a record that
        // verifies is dropped now (scan).
        drop(cache.scan());
        Ok(cache)
    }

    /// Record `tenant` as the owner of the entry `name` of `kept`, on disk and here: called
    /// before the entry is put in place, so no file of the operator's is ever in place without
    /// its owner's record (a crash in between leaves a record no file has, removed later).
    pub fn own(&self, kept: Kept, name: &str, tenant: &Tenant) -> std::io::Result<()> {
        let mac = self.tag(&cache_shares::record_context(kept.label(), name), tenant.label().as_bytes());
        let mut made = self.owner_records.create_new()?;
        made.file.write_all(cache_shares::record_text(tenant, &mac).as_bytes())?;
        made.publish(&cache_shares::record_name(kept.label(), name))?;
        self.owners.record(kept as u8, name, tenant);
        Ok(())
    }

    /// Whose the entry `name` of `kept` is, by its owner record (read within its cap, parsed
    /// strictly, its MAC checked); `Err` says why it is not believed.
    fn read_owner(&self, kept: Kept, name: &str) -> Result<Tenant, String> {
        let record = cache_shares::record_name(kept.label(), name);
        let (file, _) = self.owner_records.open_entry(&record, cache_shares::MAX_OWNER_RECORD).map_err(|e| e.to_string())?.ok_or("it has no owner record")?;
        let mut bytes = Vec::new();
        file.take(cache_shares::MAX_OWNER_RECORD).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
        let context = cache_shares::record_context(kept.label(), name);
        cache_shares::parse_record(&bytes, |label, mac| self.verify(&context, label, mac)).map_err(|why| format!("its owner record is refused: {why}"))
    }

    /// Remove the entry `name` of `kept` and its owner record.
    fn remove_entry(&self, kept: Kept, name: &str) -> std::io::Result<()> {
        self.folder(kept).remove(name)?;
        let _ = self.owner_records.remove(&cache_shares::record_name(kept.label(), name));
        Ok(())
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The open folder holding entries of this kind.
    pub fn folder(&self, kept: Kept) -> &Folder {
        match kept {
            Kept::Blobs => &self.blobs,
            Kept::Tags => &self.tags,
            Kept::Signatures => &self.signatures,
            Kept::Compiled => &self.compiled,
        }
    }

    /// `--cache-max-mib`, in bytes.
    pub fn set_max_bytes(&self, max: u64) {
        self.max_bytes.store(max, Ordering::Relaxed);
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.load(Ordering::Relaxed)
    }

    /// Which digests serve now (never collected).
    pub fn set_in_use(&self, in_use: InUse) {
        *self.in_use.write().unwrap_or_else(|p| p.into_inner()) = Some(in_use);
    }

    fn mac(&self, context: &[u8], body: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(&(context.len() as u64).to_be_bytes());
        mac.update(context);
        mac.update(body);
        mac
    }

    /// A MAC under the cache's key, bound to `context`, of a body given in pieces: as
    /// [`verify`](Self::verify) for a body too big to hold whole.
    pub fn mac_in_pieces(&self, context: &[u8]) -> MacInPieces {
        MacInPieces(self.mac(context, &[]))
    }

    /// The MAC of `body` under the cache's key, bound to `context` (the entry's name).
    pub fn tag(&self, context: &[u8], body: &[u8]) -> [u8; MAC_BYTES] {
        self.mac(context, body).finalize().into_bytes().into()
    }

    /// Whether `tag` is the cache's MAC of `body` under `context` (compared in constant time).
    pub fn verify(&self, context: &[u8], body: &[u8], tag: &[u8]) -> bool {
        self.mac(context, body).verify_slice(tag).is_ok()
    }

    /// Every file in the cache's folders with its owner (a crashed write's temporary file, long
    /// abandoned, removed on the way; a file whose owner is not known here and whose owner
    /// record does not verify, dropped), and the bytes of the key, the owner records and the
    /// writes in flight.
    fn scan(&self) -> (Vec<Entry>, u64) {
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let stale = |st: &libc::stat| now.saturating_sub(st.st_mtime) > STALE_TMP.as_secs() as i64;
        let mut entries = Vec::new();
        let mut fixed = KEY_BYTES as u64;
        // The owner records, each counted with its file (what removing the file frees).
        let mut records: HashMap<String, libc::stat> = self.owner_records.entries().unwrap_or_default().into_iter().collect();
        for kept in KEPT {
            let folder = self.folder(kept);
            for (name, st) in folder.entries().unwrap_or_default() {
                if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                    continue;
                }
                if name.starts_with(TEMP_PREFIX) {
                    // Another write's, in flight: counted, and left alone unless long abandoned.
                    if stale(&st) {
                        let _ = folder.remove(&name);
                    } else {
                        fixed += on_disk(&st);
                    }
                    continue;
                }
                let owner = match self.owners.of(kept as u8, &name).ok_or(()).or_else(|()| self.read_owner(kept, &name)) {
                    Ok(owner) => owner,
                    Err(why) => {
                        tracing::warn!(path = %folder.path().join(&name).display(), %why, "a file in the module cache has no owner the operator recorded: dropped, never counted as the cluster's");
                        let _ = self.remove_entry(kept, &name);
                        continue;
                    }
                };
                self.owners.record(kept as u8, &name, &owner);
                let record = records.remove(&cache_shares::record_name(kept.label(), &name)).map_or(0, |st| on_disk(&st));
                let size = on_disk(&st) + record;
                entries.push(Entry { kept, name, size, modified: st.st_mtime.saturating_mul(1_000_000_000).saturating_add(st.st_mtime_nsec), owner });
            }
        }
        // The owner records no file has (its file removed by a read that found it bad, or a
        // crash before it was put in place; or a write in flight): counted, and removed once as
        // old as an abandoned write.
        for (record, st) in records {
            if stale(&st) {
                let _ = self.owner_records.remove(&record);
            } else {
                fixed += on_disk(&st);
            }
        }
        (entries, fixed)
    }

    /// Remove the least recently used files until everything under the cache fits the bound,
    /// sparing what serves and `keep` (just written, in its folder, for `writer`): first those
    /// of the tenants over their part (`cache_shares.rs`).
    pub fn collect(&self, keep: (Kept, &str), writer: &Tenant) {
        let _one = self.collecting.lock().unwrap_or_else(|p| p.into_inner());
        let max = self.max_bytes();
        let (entries, fixed) = self.scan();
        self.owners.retain(|folder, name| entries.iter().any(|e| e.kept as u8 == folder && e.name == name));
        let mut total: u64 = fixed + entries.iter().map(|e| e.size).sum::<u64>();
        if total <= max {
            self.warned_full.store(false, Ordering::Relaxed);
            return;
        }
        let weighed: Vec<Weighed<'_>> = entries.iter().map(|e| Weighed { owner: &e.owner, size: e.size, used: e.modified }).collect();
        let order = cache_shares::removal_order(&weighed, max, writer);
        let mut spared = Spared::new(self);
        for entry in order.into_iter().map(|at| &entries[at]) {
            if total <= max {
                break;
            }
            if (entry.kept, entry.name.as_str()) == keep || spared.spares(entry) {
                continue;
            }
            if self.remove_entry(entry.kept, &entry.name).is_ok() {
                let owner = &entry.owner;
                tracing::debug!(folder = ?entry.kept, name = %entry.name, size = entry.size, tenant = %owner, "collected from the module cache (its tenant over its part first, then least recently used)");
                total -= entry.size;
            }
        }
        if total > max && !self.warned_full.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                total_mib = total >> 20,
                max_mib = max >> 20,
                "the module cache is over --cache-max-mib with only what serves now (and the entry just written) left in it"
            );
        }
    }

    /// What a new entry may take: the bound less what no collection can remove (what serves,
    /// the key, the writes in flight), and no more than the file system has free.
    pub fn room(&self) -> u64 {
        self.room_for(&Tenant::Cluster).0
    }

    /// [`room`](Self::room) for what `tenant` writes, and its part's room if other tenants
    /// keep files too (`cache_shares.rs`): its part less what of its own serves. The room is
    /// the smaller of the two.
    pub fn room_for(&self, tenant: &Tenant) -> (u64, Option<u64>) {
        let _one = self.collecting.lock().unwrap_or_else(|p| p.into_inner());
        let (entries, fixed) = self.scan();
        let mut spared = Spared::new(self);
        let (mut held, mut own_held) = (fixed, 0);
        for entry in &entries {
            if spared.spares(entry) {
                held += entry.size;
                own_held += if entry.owner == *tenant { entry.size } else { 0 };
            }
        }
        let free = self.root.free_bytes().unwrap_or(u64::MAX);
        let room = self.max_bytes().saturating_sub(held).min(free);
        let weighed: Vec<Weighed<'_>> = entries.iter().map(|e| Weighed { owner: &e.owner, size: e.size, used: e.modified }).collect();
        let part = cache_shares::part(self.max_bytes(), cache_shares::tenants(&weighed, tenant).len()).map(|part| part.saturating_sub(own_held).min(room));
        (part.unwrap_or(room), part)
    }

    /// Bytes each tenant keeps in the cache now (files from before a restart: their owner
    /// records' tenants).
    pub fn usage(&self) -> Vec<(Tenant, u64)> {
        let (entries, _) = self.scan();
        let mut by_tenant = std::collections::BTreeMap::<Tenant, u64>::new();
        for entry in entries {
            *by_tenant.entry(entry.owner).or_default() += entry.size;
        }
        by_tenant.into_iter().collect()
    }

    /// The digest the tag record `name` holds, if it is a record at all (its MAC is not
    /// checked: this only decides what is spared).
    fn tag_record_digest(&self, name: &str) -> Option<String> {
        let (mut file, _) = self.tags.open_entry(name, MAX_TAG_RECORD).ok()??;
        let mut record = String::new();
        file.read_to_string(&mut record).ok()?;
        Some(record.split_whitespace().next()?.to_string())
    }

    /// Whether the small blob `name` is the manifest of a module serving now (kept with its
    /// layer, its signatures and its tag's record: a restart with the registry down serves
    /// from them).
    fn manifest_of_serving(&self, name: &str, serves: &dyn Fn(&str) -> bool) -> bool {
        let Ok(Some((mut file, _))) = self.blobs.open_entry(name, MAX_MANIFEST) else { return false };
        let mut bytes = Vec::new();
        if file.read_to_end(&mut bytes).is_err() {
            return false;
        }
        let Ok(manifest) = serde_json::from_slice::<serde_json::Value>(&bytes) else { return false };
        manifest["layers"].as_array().is_some_and(|layers| {
            layers.iter().filter_map(|l| l["digest"].as_str()?.strip_prefix("sha256:")).any(serves)
        })
    }
}

/// Which entries a collection spares: what serves now, each manifest read once.
struct Spared<'a> {
    cache: &'a DiskCache,
    in_use: Option<InUse>,
    manifests: HashMap<String, bool>,
}

impl<'a> Spared<'a> {
    fn new(cache: &'a DiskCache) -> Self {
        let in_use = cache.in_use.read().unwrap_or_else(|p| p.into_inner()).clone();
        Spared { cache, in_use, manifests: HashMap::new() }
    }

    fn serves(&self, hex: &str) -> bool {
        self.in_use.as_ref().is_some_and(|f| f(&format!("sha256:{hex}")))
    }

    fn manifest_serves(&mut self, hex: &str) -> bool {
        if let Some(known) = self.manifests.get(hex) {
            return *known;
        }
        let serves = |layer: &str| self.serves(layer);
        let answer = self.cache.manifest_of_serving(hex, &serves);
        self.manifests.insert(hex.to_string(), answer);
        answer
    }

    fn spares(&mut self, entry: &Entry) -> bool {
        let hex = entry.name.get(..64).unwrap_or("");
        match entry.kept {
            Kept::Compiled => self.serves(hex),
            Kept::Blobs => self.serves(hex) || (entry.size <= MAX_MANIFEST && self.manifest_serves(&entry.name)),
            Kept::Signatures => self.manifest_serves(&entry.name),
            Kept::Tags => {
                let digest = self.cache.tag_record_digest(&entry.name);
                digest.and_then(|d| d.strip_prefix("sha256:").map(str::to_string)).is_some_and(|hex| self.manifest_serves(&hex))
            }
        }
    }
}

/// Mark an entry used now (what `collect` orders by).
pub fn touch(file: &std::fs::File) {
    let _ = file.set_modified(SystemTime::now());
}

fn load_or_make_key(root: &Folder) -> std::io::Result<[u8; KEY_BYTES]> {
    for _ in 0..3 {
        match read_key(root) {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(path = %root.path().join(KEY_FILE).display(), %why, "the module cache's key file is not the operator's own: replaced, and the compiled code it authenticated will be compiled again");
                root.remove(KEY_FILE)?;
            }
        }
        let mut key = [0u8; KEY_BYTES];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
        let mut made = root.create_new()?;
        made.file.write_all(&key)?;
        // Published whole or not at all; a process that got there first wins.
        match made.link_new(KEY_FILE) {
            Ok(()) => return Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("the key file keeps changing"))
}

/// The key, if the file is there and the operator's own; `Err` says why it is not.
fn read_key(root: &Folder) -> std::io::Result<Option<[u8; KEY_BYTES]>> {
    let (mut file, st) = match root.open_entry(KEY_FILE, KEY_BYTES as u64) {
        Ok(Some(opened)) => opened,
        Ok(None) => return Ok(None),
        Err(e) => return Err(std::io::Error::other(format!("cannot open it: {e}"))),
    };
    let me = crate::supply::cache_files::my_uid();
    // One link only: a key that is also another name (a blob whose bytes someone chose,
    // linked here) is not a key no one else knows.
    if st.st_uid != me || st.st_mode & 0o077 != 0 || st.st_size != KEY_BYTES as i64 || st.st_nlink != 1 {
        return Err(std::io::Error::other(format!(
            "owner {}, mode {:o}, {} bytes, {} links (wanted owner {me}, 0600, {KEY_BYTES}, 1)",
            st.st_uid,
            st.st_mode & 0o7777,
            st.st_size,
            st.st_nlink
        )));
    }
    let mut key = [0u8; KEY_BYTES];
    file.read_exact(&mut key)?;
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    #[test]
    fn the_key_is_made_private_once_and_kept_and_a_planted_one_is_replaced() {
        let dir = private_temp_dir("zundoko-key-test-").unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700, "a private temporary directory");
        let root = Folder::open_root(&dir).unwrap();
        let first = load_or_make_key(&root).unwrap();
        assert_eq!(std::fs::metadata(dir.join(KEY_FILE)).unwrap().mode() & 0o777, 0o600);
        assert_eq!(load_or_make_key(&root).unwrap(), first, "kept across restarts");
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        std::fs::write(dir.join(KEY_FILE), [7u8; KEY_BYTES]).unwrap();
        std::fs::set_permissions(dir.join(KEY_FILE), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let replaced = load_or_make_key(&root).unwrap();
        assert_ne!(replaced, [7u8; KEY_BYTES], "a key file readable by others is not believed");
        // The operator's own file, 0600, 32 bytes whose content another chose (a blob it
        // published), hard-linked as the key: not believed either.
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        std::fs::write(dir.join("blob"), [9u8; KEY_BYTES]).unwrap();
        std::fs::set_permissions(dir.join("blob"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        std::fs::hard_link(dir.join("blob"), dir.join(KEY_FILE)).unwrap();
        let relinked = load_or_make_key(&root).unwrap();
        assert_ne!(relinked, [9u8; KEY_BYTES], "a hard-linked key file is not believed");
        assert_eq!(std::fs::read(dir.join("blob")).unwrap(), [9u8; KEY_BYTES], "the other name is left alone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `size` bytes written into the cache as `name` for `tenant`, as a pull writes a blob.
    fn write_for(cache: &DiskCache, name: &str, size: usize, tenant: &Tenant) {
        let mut made = cache.folder(Kept::Blobs).create_new().unwrap();
        made.file.write_all(&vec![0u8; size]).unwrap();
        cache.own(Kept::Blobs, name, tenant).unwrap();
        made.publish(name).unwrap();
        cache.collect((Kept::Blobs, name), tenant);
    }

    #[test]
    fn a_cache_shared_by_two_tenants_collects_from_the_one_over_its_part_and_gives_it_only_its_part() {
        let dir = private_temp_dir("zundoko-cache-shares-").unwrap();
        let cache = DiskCache::open(&dir).unwrap();
        // 1 MiB: 512 KiB each while both keep files.
        cache.set_max_bytes(1 << 20);
        let (a, b) = (Tenant::Namespace("a".into()), Tenant::Namespace("b".into()));
        write_for(&cache, "b-old", 256 << 10, &b);
        assert_eq!(cache.room_for(&a).1.map(|part| part >> 10), Some(512), "with b there, a has its part");
        for i in 0..4 {
            write_for(&cache, &format!("a-{i}"), 256 << 10, &a);
        }
        // 1 MiB written after b's 256 KiB: by use alone b's file, the oldest, would have gone.
        let there = |name: &str| cache.folder(Kept::Blobs).open_entry(name, 1 << 20).unwrap().is_some();
        assert!(there("b-old"), "b, within its part, kept its file");
        assert!(!there("a-0"), "a, over its part, lost its oldest");
        let usage: std::collections::HashMap<_, _> = cache.usage().into_iter().collect();
        let record = std::fs::metadata(dir.join("owners/blobs-b-old")).unwrap();
        assert_eq!(usage[&b], (256 << 10) + record.len().max(record.blocks() * 512), "b's file and its owner record");
        assert!(usage[&a] <= 768 << 10, "a keeps {} KiB", usage[&a] >> 10);
        // Alone, a tenant has no part: all the room.
        let _ = std::fs::remove_dir_all(&dir);
        let dir = private_temp_dir("zundoko-cache-shares-").unwrap();
        let alone = DiskCache::open(&dir).unwrap();
        alone.set_max_bytes(1 << 20);
        write_for(&alone, "a-0", 600 << 10, &a);
        assert_eq!(alone.room_for(&a).1, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
