//! What the on-disk cache (`--cache-dir DIR`) shares between pulled blobs (`oci/cache.rs`,
//! `DIR/oci/blobs/`) and compiled code (`sandbox/compiled_cache.rs`, `DIR/compiled/`):
//! - its bound, `--cache-max-mib`: after every write, the least recently used entries (blobs
//!   and compiled code together, by modification time, which a read sets) are removed until the
//!   two folders fit, except an entry of a digest that serves now (the loader says which) and
//!   the entry just written;
//! - the key compiled code is authenticated with (HMAC-SHA256): `DIR/cache.key`, 32 random
//!   bytes made by the operator (0600, published with a link so no reader sees half of it)
//!   before any compiler process runs, and never handed to one. A key file not the operator's
//!   own (another owner, readable by others, not 32 bytes) is replaced, so what it
//!   authenticated is compiled again.
//!
//! One `DiskCache` per directory in a process: the blob cache and the compiled cache of one
//! directory share it (its bound, its key, what serves).

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, SystemTime};

use hmac::{KeyInit as _, Mac as _};

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

pub struct DiskCache {
    root: PathBuf,
    key: [u8; KEY_BYTES],
    max_bytes: AtomicU64,
    in_use: RwLock<Option<InUse>>,
    collecting: Mutex<()>,
    warned_full: AtomicBool,
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

impl DiskCache {
    /// The cache of `root` (created 0700 if missing), its key read or made now.
    pub fn open(root: &Path) -> Result<Arc<DiskCache>, String> {
        create_private_dir(root).map_err(|e| format!("cannot create the cache directory {}: {e}", root.display()))?;
        let root = root.canonicalize().map_err(|e| format!("cannot open the cache directory {}: {e}", root.display()))?;
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, cache)| cache.strong_count() > 0);
        if let Some(cache) = open.iter().find(|(path, _)| *path == root).and_then(|(_, cache)| cache.upgrade()) {
            return Ok(cache);
        }
        let key = load_or_make_key(&root.join(KEY_FILE)).map_err(|e| format!("cannot make the cache's key in {}: {e}", root.display()))?;
        let cache = Arc::new(DiskCache {
            root: root.clone(),
            key,
            max_bytes: AtomicU64::new(DEFAULT_MAX_MIB << 20),
            in_use: RwLock::new(None),
            collecting: Mutex::new(()),
            warned_full: AtomicBool::new(false),
        });
        open.push((root, Arc::downgrade(&cache)));
        Ok(cache)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `--cache-max-mib`, in bytes.
    pub fn set_max_bytes(&self, max: u64) {
        self.max_bytes.store(max, Ordering::Relaxed);
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

    /// Remove the least recently used entries until blobs and compiled code fit the bound,
    /// sparing what serves and `keep` (just written).
    pub fn collect(&self, keep: &Path) {
        let _one = self.collecting.lock().unwrap_or_else(|p| p.into_inner());
        let max = self.max_bytes.load(Ordering::Relaxed);
        let in_use = self.in_use.read().unwrap_or_else(|p| p.into_inner()).clone();
        let serves = |hex: &str| in_use.as_ref().is_some_and(|f| f(&format!("sha256:{hex}")));
        let now = SystemTime::now();
        let mut entries = Vec::new();
        for folder in [self.root.join("oci").join("blobs"), self.root.join("compiled")] {
            let Ok(dir) = std::fs::read_dir(&folder) else { continue };
            for entry in dir.flatten() {
                let (path, Ok(meta)) = (entry.path(), entry.metadata()) else { continue };
                let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.contains(".tmp-") {
                    // Another write's, in flight: left alone unless long abandoned.
                    if now.duration_since(modified).unwrap_or_default() > STALE_TMP {
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                }
                if meta.is_file() {
                    entries.push((modified, meta.len(), path, name));
                }
            }
        }
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= max {
            self.warned_full.store(false, Ordering::Relaxed);
            return;
        }
        entries.sort_by_key(|e| e.0);
        for (_, size, path, name) in entries {
            if total <= max {
                break;
            }
            let hex = name.get(..64).unwrap_or("");
            if path == keep || serves(hex) || self.manifest_of_serving(&path, size, &serves) {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                tracing::debug!(path = %path.display(), size, "collected from the module cache (least recently used)");
                total -= size;
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

    /// A small blob that is the manifest of a module serving now (kept with its layer: a
    /// restart with the registry down serves from both).
    fn manifest_of_serving(&self, path: &Path, size: u64, serves: &dyn Fn(&str) -> bool) -> bool {
        if size > 256 << 10 || !path.starts_with(self.root.join("oci")) {
            return false;
        }
        let Ok(bytes) = std::fs::read(path) else { return false };
        let Ok(manifest) = serde_json::from_slice::<serde_json::Value>(&bytes) else { return false };
        manifest["layers"].as_array().is_some_and(|layers| {
            layers.iter().filter_map(|l| l["digest"].as_str()?.strip_prefix("sha256:")).any(serves)
        })
    }
}

/// Mark an entry used now (what `collect` orders by).
pub fn touch(file: &std::fs::File) {
    let _ = file.set_modified(SystemTime::now());
}

fn load_or_make_key(path: &Path) -> std::io::Result<[u8; KEY_BYTES]> {
    for _ in 0..3 {
        match read_key(path) {
            Ok(Some(key)) => return Ok(key),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(path = %path.display(), %why, "the module cache's key file is not the operator's own: replaced, and the compiled code it authenticated will be compiled again");
                std::fs::remove_file(path)?;
            }
        }
        let mut key = [0u8; KEY_BYTES];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut key);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&tmp)?;
        file.write_all(&key)?;
        file.sync_all()?;
        // Published whole or not at all; a process that got there first wins.
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => return Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("the key file keeps changing"))
}

/// The key, if the file is there and the operator's own; `Err` says why it is not.
fn read_key(path: &Path) -> std::io::Result<Option<[u8; KEY_BYTES]>> {
    let mut file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(std::io::Error::other(format!("cannot open it: {e}"))),
    };
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 || meta.len() != KEY_BYTES as u64 {
        return Err(std::io::Error::other(format!(
            "owner {}, mode {:o}, {} bytes (wanted owner {me}, 0600, {KEY_BYTES})",
            meta.uid(),
            meta.mode() & 0o7777,
            meta.len()
        )));
    }
    let mut key = [0u8; KEY_BYTES];
    file.read_exact(&mut key)?;
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_made_private_once_and_kept_and_a_planted_one_is_replaced() {
        let dir = private_temp_dir("zundoko-key-test-").unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700, "a private temporary directory");
        let first = load_or_make_key(&dir.join(KEY_FILE)).unwrap();
        assert_eq!(std::fs::metadata(dir.join(KEY_FILE)).unwrap().mode() & 0o777, 0o600);
        assert_eq!(load_or_make_key(&dir.join(KEY_FILE)).unwrap(), first, "kept across restarts");
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        std::fs::write(dir.join(KEY_FILE), [7u8; KEY_BYTES]).unwrap();
        std::fs::set_permissions(dir.join(KEY_FILE), std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        let replaced = load_or_make_key(&dir.join(KEY_FILE)).unwrap();
        assert_ne!(replaced, [7u8; KEY_BYTES], "a key file readable by others is not believed");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
