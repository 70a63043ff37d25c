//! Pulled blobs kept by digest on disk (`--cache-dir DIR/oci/`), so a restart with the registry
//! down still serves the last module verified. Content-addressed: every read is hashed again and
//! a blob whose bytes no longer match its name is dropped, never served. Beside the blobs: the
//! digest each tag was last resolved to, and which artifacts were verified with which keys.
//! Blobs count towards the cache's bound with compiled code (`supply/disk_cache.rs`): a read
//! marks a blob used, a write collects the least recently used.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::supply::digest::{digest as digest_of, from_hex};

use super::reference::ModuleRef;
use super::signature::TrustedKey;
use crate::supply::disk_cache::DiskCache;

pub struct BlobCache {
    disk: Arc<DiskCache>,
    root: PathBuf,
}

fn hex_of(digest: &str) -> Option<&str> {
    crate::supply::digest::hex_of(digest).filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl BlobCache {
    /// The cache under `dir/oci`, created if missing.
    pub fn open(dir: &Path) -> Result<Self, String> {
        let disk = DiskCache::open(dir)?;
        let root = disk.root().join("oci");
        for sub in ["blobs", "tags", "verified"] {
            crate::supply::disk_cache::create_private_dir(&root.join(sub)).map_err(|e| format!("cannot create the module cache {}: {e}", root.join(sub).display()))?;
        }
        Ok(BlobCache { disk, root })
    }

    /// The directory (its bound, its key, what serves).
    pub fn disk(&self) -> &Arc<DiskCache> {
        &self.disk
    }

    /// The blob with this digest, if kept and intact.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.root.join("blobs").join(hex_of(digest)?);
        let mut file = std::fs::File::open(&path).ok()?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).ok()?;
        if digest_of(&bytes) != digest {
            tracing::warn!(path = %path.display(), %digest, "a cached blob does not match its digest; dropped");
            let _ = std::fs::remove_file(&path);
            return None;
        }
        crate::supply::disk_cache::touch(&file);
        Some(bytes)
    }

    /// Keep a blob whose digest the caller checked. Best effort: a full disk costs a pull later.
    pub fn put(&self, digest: &str, bytes: &[u8]) {
        if let Some(hex) = hex_of(digest) {
            let path = self.root.join("blobs").join(hex);
            self.write(&path, bytes);
            self.disk.collect(&path);
        }
    }

    /// The digest `reference`'s tag resolved to last time.
    pub fn tag(&self, reference: &ModuleRef) -> Option<String> {
        let digest = std::fs::read_to_string(self.tag_path(reference)).ok()?;
        hex_of(digest.trim()).map(from_hex)
    }

    pub fn put_tag(&self, reference: &ModuleRef, digest: &str) {
        self.write(&self.tag_path(reference), digest.as_bytes());
    }

    /// Which key verified this artifact, if one of `keys` did before.
    pub fn verified(&self, manifest_digest: &str, keys: &[TrustedKey]) -> Option<String> {
        std::fs::read_to_string(self.verified_path(manifest_digest, keys)?).ok()
    }

    pub fn put_verified(&self, manifest_digest: &str, keys: &[TrustedKey], signer: &str) {
        if let Some(path) = self.verified_path(manifest_digest, keys) {
            self.write(&path, signer.as_bytes());
        }
    }

    fn tag_path(&self, reference: &ModuleRef) -> PathBuf {
        let name = reference.with_tag(reference.tag.as_deref().unwrap_or("latest")).to_string();
        self.root.join("tags").join(hex::encode(Sha256::digest(name.as_bytes())))
    }

    /// Named by the artifact and the set of keys: another set of keys verifies again.
    fn verified_path(&self, manifest_digest: &str, keys: &[TrustedKey]) -> Option<PathBuf> {
        let mut fingerprints: Vec<String> = keys.iter().map(TrustedKey::fingerprint).collect();
        fingerprints.sort();
        let set = hex::encode(Sha256::digest(fingerprints.join(",").as_bytes()));
        Some(self.root.join("verified").join(format!("{}-{}", hex_of(manifest_digest)?, &set[..16])))
    }

    /// Write through a temporary file and a rename, so a reader never sees half a blob.
    fn write(&self, path: &Path, bytes: &[u8]) {
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        let written = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all())).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(error) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!(path = %path.display(), %error, "could not write to the module cache");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_served_only_while_they_match_their_digest() {
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-cache-test-").unwrap();
        let cache = BlobCache::open(&dir).unwrap();
        let digest = crate::supply::digest::digest(b"module");
        assert_eq!(cache.get(&digest), None);
        cache.put(&digest, b"module");
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"module"[..]));
        std::fs::write(dir.join("oci/blobs").join(&digest[7..]), b"tampered").unwrap();
        assert_eq!(cache.get(&digest), None, "a blob that no longer matches is not served");
        assert!(!dir.join("oci/blobs").join(&digest[7..]).exists(), "and it is dropped");
        let r: ModuleRef = "127.0.0.1:5000/rules/ja:v1".parse().unwrap();
        assert_eq!(cache.tag(&r), None);
        cache.put_tag(&r, &digest);
        assert_eq!(cache.tag(&r), Some(digest.clone()));
        assert_eq!(cache.tag(&"127.0.0.1:5000/rules/ja:v2".parse().unwrap()), None);
        let key = super::super::signature::SignKey::generate().trusted("k");
        assert_eq!(cache.verified(&digest, std::slice::from_ref(&key)), None);
        cache.put_verified(&digest, std::slice::from_ref(&key), "k");
        assert_eq!(cache.verified(&digest, std::slice::from_ref(&key)).as_deref(), Some("k"));
        let other = super::super::signature::SignKey::generate().trusted("o");
        assert_eq!(cache.verified(&digest, &[other]), None, "another set of keys verifies again");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
