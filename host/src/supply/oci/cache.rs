//! Pulled blobs kept by digest on disk (`--cache-dir DIR/oci/`), so a restart with the registry
//! down still serves the last module verified. Content-addressed: every read is hashed again and
//! a blob whose bytes no longer match its name is dropped, never served. Beside the blobs:
//! - the digest each tag was last resolved to, authenticated with the cache's key
//!   (`DiskCache::tag`, bound to the tag's name): whoever can write the directory cannot point
//!   a tag at another (older, still signed) artifact for a restart with the registry down;
//! - the signatures that verified when an artifact was pulled, at most
//!   [`MAX_KEPT_SIGNATURES`] (payloads and signatures as the registry had them): a verdict is
//!   never stored, the signatures are verified again on every load against the keys trusted
//!   then (one ECDSA P-256 verification per kept signature), so a record written by hand is
//!   worth what its signatures are.
//!
//! Every file here counts towards the cache's bound with compiled code
//! (`supply/disk_cache.rs`): a read marks it used, a write collects the least recently used.
//! Each is made under a fresh name and renamed into place, and read only if it is a regular
//! file within its cap (`supply/cache_files.rs`).

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::supply::digest::{digest as digest_of, from_hex};

use super::reference::ModuleRef;
use super::signature::Found;
use crate::supply::disk_cache::{DiskCache, Kept, MAC_BYTES, MAX_TAG_RECORD};

/// The most signatures kept for one artifact: those that verified, the first few (one per
/// trusted key set is what a load needs).
pub const MAX_KEPT_SIGNATURES: usize = 4;
/// The most a signatures record may hold: what a pull keeps of one (4 payloads of 64 KiB at
/// most, base64) with room; a bigger one is not read.
const MAX_SIGNATURES_RECORD: u64 = 512 << 10;
/// The biggest blob read back (`--max-module-mib` cannot pass it); a bigger file is no blob
/// the operator wrote.
const MAX_BLOB_BYTES: u64 = 1 << 30;

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
}

fn hex_of(digest: &str) -> Option<&str> {
    crate::supply::digest::hex_of(digest).filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl BlobCache {
    /// The cache under `dir/oci`, created if missing (its folders checked: `DiskCache::open`).
    pub fn open(dir: &Path) -> Result<Self, String> {
        Ok(BlobCache { disk: DiskCache::open(dir)? })
    }

    /// The directory (its bound, its key, what serves).
    pub fn disk(&self) -> &Arc<DiskCache> {
        &self.disk
    }

    /// The blob with this digest, if kept and intact.
    pub fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let hex = hex_of(digest)?;
        let blobs = self.disk.folder(Kept::Blobs);
        let (mut file, _) = self.entry(Kept::Blobs, hex, MAX_BLOB_BYTES)?;
        let mut bytes = Vec::new();
        (&mut file).take(MAX_BLOB_BYTES).read_to_end(&mut bytes).ok()?;
        if digest_of(&bytes) != digest {
            tracing::warn!(path = %blobs.path().join(hex).display(), %digest, "a cached blob does not match its digest; dropped");
            let _ = blobs.remove(hex);
            return None;
        }
        crate::supply::disk_cache::touch(&file);
        Some(bytes)
    }

    /// Keep a blob whose digest the caller checked. Best effort: a full disk costs a pull later.
    pub fn put(&self, digest: &str, bytes: &[u8]) {
        if let Some(hex) = hex_of(digest) {
            self.write(Kept::Blobs, hex, bytes);
        }
    }

    /// The digest `reference`'s tag resolved to last time, if its record is the operator's own
    /// (its MAC under the cache's key, for this tag's name, holds). A record that is not (no
    /// digest and MAC, or a MAC that does not hold) is dropped, as a blob that no longer
    /// matches its digest is: refused once, it would be refused at every read after.
    pub fn tag(&self, reference: &ModuleRef) -> Option<String> {
        let name = Self::tag_file(reference);
        let tags = self.disk.folder(Kept::Tags);
        let (file, _) = self.entry(Kept::Tags, &name, MAX_TAG_RECORD)?;
        let mut record = Vec::new();
        file.take(MAX_TAG_RECORD).read_to_end(&mut record).ok()?;
        let parsed = std::str::from_utf8(&record).ok().and_then(|text| text.trim().split_once(' '));
        let verified = parsed.and_then(|(digest, mac)| {
            let mac = hex::decode(mac).ok().filter(|m| m.len() == MAC_BYTES)?;
            self.disk.verify(&Self::tag_context(reference), digest.as_bytes(), &mac).then_some(digest)
        });
        let Some(digest) = verified else {
            tracing::warn!(path = %tags.path().join(&name).display(), %reference, "a cached tag is not the operator's own record (its MAC does not hold); dropped");
            let _ = tags.remove(&name);
            return None;
        };
        hex_of(digest).map(from_hex)
    }

    pub fn put_tag(&self, reference: &ModuleRef, digest: &str) {
        let mac = self.disk.tag(&Self::tag_context(reference), digest.as_bytes());
        self.write(Kept::Tags, &Self::tag_file(reference), format!("{digest} {}\n", hex::encode(mac)).as_bytes());
    }

    /// What a tag's record is bound to: the tag's full name.
    fn tag_context(reference: &ModuleRef) -> Vec<u8> {
        format!("oci tag {}", Self::tag_name(reference)).into_bytes()
    }

    fn tag_name(reference: &ModuleRef) -> String {
        reference.with_tag(reference.tag.as_deref().unwrap_or("latest")).to_string()
    }

    /// The signatures kept for artifact `manifest_digest` (unverified: the caller verifies them
    /// with the keys trusted now), if a record of them is kept and readable, and holds at most
    /// [`MAX_KEPT_SIGNATURES`].
    pub fn signatures(&self, manifest_digest: &str) -> Option<Vec<Found>> {
        let (file, _) = self.entry(Kept::Signatures, hex_of(manifest_digest)?, MAX_SIGNATURES_RECORD)?;
        let mut record = Vec::new();
        file.take(MAX_SIGNATURES_RECORD + 1).read_to_end(&mut record).ok()?;
        if record.len() as u64 > MAX_SIGNATURES_RECORD {
            return None;
        }
        let kept: Vec<KeptSignature> = serde_json::from_slice(&record).ok()?;
        // More than a pull keeps is no record the operator wrote: refused, not verified one
        // ECDSA verification each (a 512 KiB record holds thousands).
        if kept.len() > MAX_KEPT_SIGNATURES {
            return None;
        }
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        kept.into_iter().map(|k| Some(Found { payload: b64.decode(k.payload).ok()?, signature: k.signature })).collect()
    }

    /// Keep the signatures of artifact `manifest_digest` that verified (the caller says which),
    /// the first [`MAX_KEPT_SIGNATURES`] of them.
    pub fn put_signatures(&self, manifest_digest: &str, verified: &[Found]) {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let kept: Vec<KeptSignature> =
            verified.iter().take(MAX_KEPT_SIGNATURES).map(|f| KeptSignature { payload: b64.encode(&f.payload), signature: f.signature.clone() }).collect();
        if let (Some(hex), Ok(record)) = (hex_of(manifest_digest), serde_json::to_vec(&kept)) {
            self.write(Kept::Signatures, hex, &record);
        }
    }

    /// A tag record's file name: the SHA-256 of the tag's full name.
    pub(super) fn tag_file(reference: &ModuleRef) -> String {
        hex::encode(Sha256::digest(Self::tag_name(reference).as_bytes()))
    }

    /// The names of the tag records kept (writes in flight aside).
    pub(super) fn tag_records(&self) -> Vec<String> {
        let entries = self.disk.folder(Kept::Tags).entries().unwrap_or_default();
        entries.into_iter().filter(|(name, _)| !name.starts_with(crate::supply::cache_files::TEMP_PREFIX)).map(|(name, _)| name).collect()
    }

    /// Remove the tag record `name` (one no source names any more).
    pub(super) fn remove_tag_record(&self, name: &str) {
        let folder = self.disk.folder(Kept::Tags);
        match folder.remove(name) {
            Ok(()) => tracing::debug!(path = %folder.path().join(name).display(), "removed a tag record no source names"),
            Err(error) => tracing::warn!(path = %folder.path().join(name).display(), %error, "could not remove a tag record no source names"),
        }
    }

    /// The entry `name` of a folder, opened if it is a regular file of at most `max` bytes
    /// (never through a link); one that is not is dropped, with a warning.
    fn entry(&self, kept: Kept, name: &str, max: u64) -> Option<(std::fs::File, libc::stat)> {
        let folder = self.disk.folder(kept);
        match folder.open_entry(name, max) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(path = %folder.path().join(name).display(), %error, "an entry of the module cache is not one the operator wrote; dropped");
                let _ = folder.remove(name);
                None
            }
        }
    }

    /// Write under a fresh name and rename into place, so a reader never sees half a file;
    /// then bring the cache back under its bound.
    fn write(&self, kept: Kept, name: &str, bytes: &[u8]) {
        // Whose pull this is (`Tenant::pulling`): while other tenants keep files too, a blob
        // past its part of the room is not kept (cache_shares.rs).
        let tenant = crate::supply::tenant::Tenant::pulling_now();
        if kept == Kept::Blobs
            && let (_, Some(part)) = self.disk.room_for(&tenant)
            && bytes.len() as u64 > part
        {
            tracing::warn!(%tenant, size = bytes.len(), room = part, "a pulled blob was not kept in the module cache: it would take {tenant} past its part of --cache-max-mib");
            return;
        }
        let folder = self.disk.folder(kept);
        // Its owner recorded first (`DiskCache::own`): a file in place always has one.
        let written = folder.create_new().and_then(|mut made| {
            made.file.write_all(bytes)?;
            self.disk.own(kept, name, &tenant)?;
            made.publish(name)
        });
        if let Err(error) = written {
            tracing::warn!(path = %folder.path().join(name).display(), %error, "could not write to the module cache");
        }
        self.disk.collect((kept, name), &tenant);
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
        std::fs::write(dir.join("oci/tags").join(BlobCache::tag_file(&v2)), format!("{other}\n")).unwrap();
        assert_eq!(cache.tag(&v2), None, "a tag record without the cache's MAC");
        let tag_path = |r: &ModuleRef| dir.join("oci/tags").join(BlobCache::tag_file(r));
        assert!(!tag_path(&v2).exists(), "a refused record is dropped, not read again at every start");
        std::fs::copy(tag_path(&r), tag_path(&v2)).unwrap();
        assert_eq!(cache.tag(&v2), None, "another tag's record");
        assert!(!tag_path(&v2).exists(), "dropped too");
        assert!(tag_path(&r).exists(), "a record read and believed stays");
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
