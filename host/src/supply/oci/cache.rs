//! Pulled blobs kept by digest on disk (`--cache-dir DIR/oci/`), so a restart with the registry
//! down still serves the last module verified. Content-addressed: every read is hashed again and
//! a blob whose bytes no longer match its name is dropped, never served. Beside the blobs:
//! - the digest each tag was last resolved to, authenticated with the cache's key
//!   (`DiskCache::tag`, bound to the tag's name): whoever can write the directory cannot point
//!   a tag at another (older, still signed) artifact for a restart with the registry down;
//! - the signatures found next to each artifact (payloads and signatures as the registry had
//!   them): a verdict is never stored, the signatures are verified again on every load against
//!   the keys trusted then (one ECDSA P-256 verification per kept signature), so a record
//!   written by hand is worth what its signatures are.
//!
//! Blobs count towards the cache's bound with compiled code (`supply/disk_cache.rs`): a read
//! marks a blob used, a write collects the least recently used.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::supply::digest::{digest as digest_of, from_hex};

use super::reference::ModuleRef;
use super::signature::Found;
use crate::supply::disk_cache::{DiskCache, MAC_BYTES};

/// The most a signatures record may hold: what a pull keeps of one (16 payloads of 64 KiB at
/// most, base64) with room; a bigger one is not read.
const MAX_SIGNATURES_RECORD: u64 = 2 << 20;

/// A signature as the record keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
struct KeptSignature {
    /// The simple-signing payload, base64.
    payload: String,
    /// Its signature, base64 DER, as the registry had it.
    signature: String,
}

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
        for sub in ["blobs", "tags", "signatures"] {
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

    /// The digest `reference`'s tag resolved to last time, if its record is the operator's own
    /// (its MAC under the cache's key, for this tag's name, holds).
    pub fn tag(&self, reference: &ModuleRef) -> Option<String> {
        let path = self.tag_path(reference);
        let record = std::fs::read(&path).ok().filter(|r| r.len() <= 256)?;
        let text = std::str::from_utf8(&record).ok()?;
        let (digest, mac) = text.trim().split_once(' ')?;
        let mac = hex::decode(mac).ok().filter(|m| m.len() == MAC_BYTES)?;
        if !self.disk.verify(&Self::tag_context(reference), digest.as_bytes(), &mac) {
            tracing::warn!(path = %path.display(), %reference, "a cached tag is not the operator's own record (its MAC does not hold); ignored");
            return None;
        }
        hex_of(digest).map(from_hex)
    }

    pub fn put_tag(&self, reference: &ModuleRef, digest: &str) {
        let mac = self.disk.tag(&Self::tag_context(reference), digest.as_bytes());
        self.write(&self.tag_path(reference), format!("{digest} {}\n", hex::encode(mac)).as_bytes());
    }

    /// What a tag's record is bound to: the tag's full name.
    fn tag_context(reference: &ModuleRef) -> Vec<u8> {
        format!("oci tag {}", Self::tag_name(reference)).into_bytes()
    }

    fn tag_name(reference: &ModuleRef) -> String {
        reference.with_tag(reference.tag.as_deref().unwrap_or("latest")).to_string()
    }

    /// The signatures kept for artifact `manifest_digest` (unverified: the caller verifies them
    /// with the keys trusted now), if a record of them is kept and readable.
    pub fn signatures(&self, manifest_digest: &str) -> Option<Vec<Found>> {
        let file = std::fs::File::open(self.signatures_path(manifest_digest)?).ok()?;
        let mut record = Vec::new();
        file.take(MAX_SIGNATURES_RECORD + 1).read_to_end(&mut record).ok()?;
        if record.len() as u64 > MAX_SIGNATURES_RECORD {
            return None;
        }
        let kept: Vec<KeptSignature> = serde_json::from_slice(&record).ok()?;
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        kept.into_iter().map(|k| Some(Found { payload: b64.decode(k.payload).ok()?, signature: k.signature })).collect()
    }

    /// Keep the signatures found next to artifact `manifest_digest`.
    pub fn put_signatures(&self, manifest_digest: &str, found: &[Found]) {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let kept: Vec<KeptSignature> = found.iter().map(|f| KeptSignature { payload: b64.encode(&f.payload), signature: f.signature.clone() }).collect();
        if let Some(path) = self.signatures_path(manifest_digest) {
            self.write(&path, &serde_json::to_vec(&kept).expect("signatures serialize"));
        }
    }

    fn tag_path(&self, reference: &ModuleRef) -> PathBuf {
        self.root.join("tags").join(hex::encode(Sha256::digest(Self::tag_name(reference).as_bytes())))
    }

    fn signatures_path(&self, manifest_digest: &str) -> Option<PathBuf> {
        Some(self.root.join("signatures").join(hex_of(manifest_digest)?))
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
        let v2: ModuleRef = "127.0.0.1:5000/rules/ja:v2".parse().unwrap();
        assert_eq!(cache.tag(&v2), None);
        // Forged: the record written by hand (as the cache wrote it before it had a MAC), or
        // another tag's genuine record copied over this one's name: not believed.
        let other = crate::supply::digest::digest(b"an older module");
        std::fs::write(cache.tag_path(&v2), format!("{other}\n")).unwrap();
        assert_eq!(cache.tag(&v2), None, "a tag record without the cache's MAC");
        std::fs::copy(cache.tag_path(&r), cache.tag_path(&v2)).unwrap();
        assert_eq!(cache.tag(&v2), None, "another tag's record");
        cache.put_tag(&v2, &other);
        assert_eq!(cache.tag(&v2), Some(other));
        assert_eq!(cache.signatures(&digest).map(|f| f.len()), None);
        let found = [Found { payload: b"payload".to_vec(), signature: "c2ln".into() }];
        cache.put_signatures(&digest, &found);
        let kept = cache.signatures(&digest).unwrap();
        assert_eq!((kept[0].payload.as_slice(), kept[0].signature.as_str()), (&b"payload"[..], "c2ln"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
