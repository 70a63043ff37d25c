//! Cosign-compatible key-based signatures, verified offline.
//!
//! What `cosign sign --key` stores and `cosign verify --key --insecure-ignore-tlog` checks: a
//! "simple signing" JSON payload naming the artifact's manifest digest, signed with ECDSA P-256
//! over SHA-256 (DER, base64 in the layer annotation `dev.cosignproject.cosign/signature`), as a
//! layer of an image tagged `sha256-<hex>.sig` in the artifact's repository. No transparency log
//! and no certificate authority: a trusted key is a PEM public key the operator is given.
//!
//! Why not the sigstore crate: its `cosign` feature needs its `verify` feature, which pulls
//! Fulcio, Rekor and an OpenID Connect client (about 180 more crates here, and aws-lc or
//! OpenSSL) for the one check done here, ECDSA P-256 over the payload, which it also does
//! with RustCrypto's p256, as this file does.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{DerSignature, Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use serde::{Deserialize, Serialize};

use super::reference::canonical_repository;

/// The media type of a simple-signing payload layer.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 DER signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What cosign writes as the payload's type.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The tag cosign stores an artifact's signatures under: `sha256-<hex>.sig`.
pub fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.sig", manifest_digest.replace(':', "-"))
}

/// A public key whose signatures are trusted, named by where it came from and its fingerprint.
#[derive(Clone)]
pub struct TrustedKey {
    pub name: String,
    key: VerifyingKey,
}

impl fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)
    }
}

impl PartialEq for TrustedKey {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl TrustedKey {
    /// A PEM public key (`-----BEGIN PUBLIC KEY-----`, as `cosign generate-key-pair` writes
    /// `cosign.pub`). `origin` names it in messages, with the key's own fingerprint.
    pub fn from_pem(origin: &str, pem: &str) -> Result<Self, String> {
        let key = VerifyingKey::from_public_key_pem(pem.trim())
            .map_err(|e| format!("{origin} is not a PEM ECDSA P-256 public key (-----BEGIN PUBLIC KEY-----): {e}"))?;
        Ok(TrustedKey { name: format!("{origin} ({})", fingerprint(&key)), key })
    }

    /// Every `*.pub` or `*.pem` file of a directory (a mounted Secret), or one file.
    pub fn load(path: &Path) -> Result<Vec<TrustedKey>, String> {
        let files = if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .map_err(|e| format!("cannot read trusted keys in {}: {e}", path.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                // A mounted Secret's entries are symlinks into `..data`; its hidden entries are not keys.
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.') && (n.ends_with(".pub") || n.ends_with(".pem"))))
                .collect();
            files.sort();
            files
        } else {
            vec![path.to_path_buf()]
        };
        let mut keys = Vec::new();
        for file in files {
            let pem = read_key_file(&file, "trusted key")?;
            keys.push(TrustedKey::from_pem(&file.display().to_string(), &pem)?);
        }
        if keys.is_empty() {
            return Err(format!("no trusted key (*.pub or *.pem) in {}", path.display()));
        }
        Ok(keys)
    }

    pub fn fingerprint(&self) -> String {
        fingerprint(&self.key)
    }
}

/// The most a trusted key file may hold: a PEM P-256 public key is 178 bytes; the rest is room
/// for comments around it. A bigger file is no key, and is not read.
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// A key file's text, read within [`MAX_KEY_FILE_BYTES`] before anything is buffered
/// (`given_files.rs`: through the kubelet's links, without blocking, a regular file only).
fn read_key_file(file: &Path, what: &str) -> Result<String, String> {
    let bytes = super::given_files::read_within(file, MAX_KEY_FILE_BYTES).map_err(|why| format!("{what} {}: {why}", file.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{what} {}: not UTF-8 text (a PEM key is ASCII)", file.display()))
}

/// `sha256:` and the first 16 hex digits of the DER public key's SHA-256.
fn fingerprint(key: &VerifyingKey) -> String {
    let der = key.to_public_key_der().map(|d| d.as_bytes().to_vec()).unwrap_or_default();
    crate::supply::digest::fingerprint(&der)
}

/// A key that signs (`push --sign KEY`): a PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`) or SEC1
/// (`-----BEGIN EC PRIVATE KEY-----`) ECDSA P-256 private key.
pub struct SignKey(SigningKey);

/// Never prints the key.
impl fmt::Debug for SignKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignKey({})", fingerprint(self.0.verifying_key()))
    }
}

impl SignKey {
    /// A signing key from its file, read within [`MAX_KEY_FILE_BYTES`] as a trusted key is.
    pub fn load(path: &Path) -> Result<Self, String> {
        Self::from_pem(&path.display().to_string(), &read_key_file(path, "signing key")?)
    }

    pub fn from_pem(origin: &str, pem: &str) -> Result<Self, String> {
        let pem = pem.trim();
        if pem.contains("ENCRYPTED") {
            return Err(format!(
                "{origin} is an encrypted private key: give an unencrypted PEM ECDSA P-256 key (`zundoko-operator keygen` writes one; `cosign import-key-pair` takes the same key for cosign)"
            ));
        }
        if let Ok(key) = SigningKey::from_pkcs8_pem(pem) {
            return Ok(SignKey(key));
        }
        p256::SecretKey::from_sec1_pem(pem)
            .map(|k| SignKey(SigningKey::from(k)))
            .map_err(|_| format!("{origin} is not a PEM ECDSA P-256 private key (PKCS#8 `BEGIN PRIVATE KEY` or SEC1 `BEGIN EC PRIVATE KEY`)"))
    }

    /// A new random key.
    pub fn generate() -> Self {
        loop {
            let bytes: [u8; 32] = rand::random();
            if let Ok(key) = SigningKey::from_slice(&bytes) {
                return SignKey(key);
            }
        }
    }

    pub fn private_pem(&self) -> String {
        self.0.to_pkcs8_pem(LineEnding::LF).map(|p| p.to_string()).expect("a P-256 key encodes")
    }

    pub fn public_pem(&self) -> String {
        self.0.verifying_key().to_public_key_pem(LineEnding::LF).expect("a P-256 key encodes")
    }

    pub fn trusted(&self, origin: &str) -> TrustedKey {
        TrustedKey::from_pem(origin, &self.public_pem()).expect("own public key parses")
    }

    /// The base64 DER signature of `payload`, as cosign stores it.
    pub fn sign(&self, payload: &[u8]) -> String {
        let signature: Signature = self.0.sign(payload);
        base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes())
    }
}

#[derive(Serialize, Deserialize, Debug)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Debug)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    type_: String,
}

#[derive(Serialize, Deserialize, Debug)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Serialize, Deserialize, Debug)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The simple-signing payload for an artifact (`repository` without tag or digest).
pub fn payload(repository: &str, manifest_digest: &str) -> Vec<u8> {
    let payload = Payload {
        critical: Critical {
            identity: Identity { docker_reference: repository.into() },
            image: Image { docker_manifest_digest: manifest_digest.into() },
            type_: PAYLOAD_TYPE.into(),
        },
        optional: None,
    };
    serde_json::to_vec(&payload).expect("payload serializes")
}

/// One signature found next to an artifact: the payload and its base64 signature.
pub struct Found {
    pub payload: Vec<u8>,
    pub signature: String,
}

/// Which trusted key signed the artifact `manifest_digest`, from the signatures found next to
/// it; or why none did, naming the keys tried. With `identity` (a rule set's `requireIdentity`:
/// its repository, `REGISTRY/REPOSITORY`), only a payload whose `docker-reference` names that
/// repository counts: a signed artifact copied from another repository does not verify here.
pub fn verify(manifest_digest: &str, found: &[Found], keys: &[TrustedKey], identity: Option<&str>) -> Result<String, String> {
    let tried = keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ");
    if found.is_empty() {
        return Err(format!("the module is not signed (no signature at {}); keys trusted: {tried}", signature_tag(manifest_digest)));
    }
    let mut why = Vec::new();
    for (i, sig) in found.iter().enumerate() {
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(sig.signature.trim()) else {
            why.push(format!("signature {i}: not base64"));
            continue;
        };
        let Ok(signature) = DerSignature::try_from(der.as_slice()).and_then(Signature::try_from) else {
            why.push(format!("signature {i}: not a DER ECDSA signature"));
            continue;
        };
        let Some(key) = keys.iter().find(|k| k.key.verify(&sig.payload, &signature).is_ok()) else {
            why.push(format!("signature {i}: made by none of the trusted keys"));
            continue;
        };
        // A signature is only worth the digest its payload names: one copied from another
        // artifact verifies, and names that artifact.
        match serde_json::from_slice::<Payload>(&sig.payload) {
            Ok(p) if p.critical.image.docker_manifest_digest == manifest_digest => match identity {
                // One repository however written (cosign writes Docker Hub's `index.docker.io/`).
                Some(wanted) if canonical_repository(&p.critical.identity.docker_reference) != canonical_repository(wanted) => why.push(format!(
                    "signature {i}: by {} for this artifact but in repository {}, not {wanted} (requireIdentity)",
                    key.name,
                    crate::text::printable(&p.critical.identity.docker_reference, 200)
                )),
                _ => return Ok(key.name.clone()),
            },
            Ok(p) => why.push(format!(
                "signature {i}: by {} but for {}, not this artifact",
                key.name,
                crate::text::printable(&p.critical.image.docker_manifest_digest, 80)
            )),
            Err(e) => why.push(format!("signature {i}: by {} but its payload is not a simple-signing payload: {e}", key.name)),
        }
    }
    Err(format!("no valid signature by a trusted key ({}); keys trusted: {tried}", why.join("; ")))
}

/// The first `most` of `found` that verify on their own with one of `keysets` (as [`verify`]
/// checks them): what the cache keeps of an artifact's signatures. A payload beside them that
/// verified nothing (a registry may put up to 16 of 64 KiB beside one good one) is not kept.
pub fn verified(manifest_digest: &str, found: Vec<Found>, keysets: &[&[TrustedKey]], identity: Option<&str>, most: usize) -> Vec<Found> {
    let verifies = |f: &Found| keysets.iter().any(|keys| verify(manifest_digest, std::slice::from_ref(f), keys, identity).is_ok());
    found.into_iter().filter(verifies).take(most).collect()
}

/// A module signed outside a registry (`zundoko-operator sign`, `--require-signatures`): an
/// ECDSA P-256 signature over the module's SHA-256, base64 DER. The same as `cosign sign-blob
/// --key` writes for the module file (it signs the file's SHA-256), so either may make it and
/// `cosign verify-blob --key` checks it.
pub fn sign_digest(key: &SignKey, digest: &str) -> Result<String, String> {
    use p256::ecdsa::signature::hazmat::PrehashSigner as _;
    let hash = digest_bytes(digest)?;
    let signature: Signature = key.0.sign_prehash(&hash).map_err(|e| format!("cannot sign {digest}: {e}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes()))
}

/// Which trusted key made `signature` (as [`sign_digest`] writes it) over the module whose
/// SHA-256 is `digest`; or why none did, naming the keys tried.
pub fn verify_digest(digest: &str, signature: &str, keys: &[TrustedKey]) -> Result<String, String> {
    use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
    let tried = keys.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(", ");
    let hash = digest_bytes(digest)?;
    let der = base64::engine::general_purpose::STANDARD.decode(signature.trim()).map_err(|_| "the signature is not base64".to_string())?;
    let signature = DerSignature::try_from(der.as_slice())
        .and_then(Signature::try_from)
        .map_err(|_| "the signature is not a DER ECDSA signature".to_string())?;
    match keys.iter().find(|k| k.key.verify_prehash(&hash, &signature).is_ok()) {
        Some(key) => Ok(key.name.clone()),
        None => Err(format!("the signature over {digest} was made by none of the trusted keys ({tried})")),
    }
}

/// The 32 bytes of `sha256:<hex>`.
fn digest_bytes(digest: &str) -> Result<Vec<u8>, String> {
    crate::supply::digest::hex_of(digest).and_then(|h| hex::decode(h).ok()).filter(|b| b.len() == 32).ok_or_else(|| format!("{digest} is not a sha256 digest"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000001";

    #[test]
    fn key_files_are_read_through_the_kubelets_links_and_only_within_their_cap() {
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-key-files-").unwrap();
        let key = SignKey::generate();
        // A mounted Secret: `a.pub -> ..data/a.pub`, `..data -> ..2026_11_28_version`.
        std::fs::create_dir(dir.join("..2026_11_28_version")).unwrap();
        std::fs::write(dir.join("..2026_11_28_version/a.pub"), key.public_pem()).unwrap();
        std::os::unix::fs::symlink("..2026_11_28_version", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/a.pub", dir.join("a.pub")).unwrap();
        let keys = TrustedKey::load(&dir).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0], key.trusted("a"));
        // A key file one byte over the cap: refused unread, naming the file and the cap.
        let big = dir.join("big.pub");
        let mut text = key.public_pem().into_bytes();
        text.resize(MAX_KEY_FILE_BYTES as usize + 1, b'\n');
        std::fs::write(&big, text).unwrap();
        let refused = TrustedKey::load(&big).unwrap_err();
        assert!(refused.contains(&big.display().to_string()) && refused.contains("65536-byte limit"), "{refused}");
        assert!(TrustedKey::load(&dir).is_err_and(|e| e.contains("big.pub")), "one key too big: the set is unreadable");
        std::fs::remove_file(&big).unwrap();
        // Not a regular file (a FIFO, a device): refused, never read (a FIFO would block).
        let fifo = dir.join("fifo.pub");
        let path = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: a NUL-terminated path; the result is checked.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert!(TrustedKey::load(&fifo).is_err_and(|e| e.contains("not a regular file")), "a FIFO");
        assert!(TrustedKey::load(Path::new("/dev/zero")).is_err_and(|e| e.contains("not a regular file")), "a device");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_signature_by_a_trusted_key_over_this_digest_verifies() {
        let key = SignKey::generate();
        let payload = payload("127.0.0.1:5000/rules/ja", DIGEST);
        let found = [Found { signature: key.sign(&payload), payload }];
        assert!(verify(DIGEST, &found, &[key.trusted("k")], None).unwrap().starts_with("k (sha256:"));
    }

    #[test]
    fn only_the_signatures_that_verify_are_kept_and_only_a_few() {
        let (key, other) = (SignKey::generate(), SignKey::generate());
        let p = payload("127.0.0.1:5000/rules/ja", DIGEST);
        let good = || Found { signature: key.sign(&p), payload: p.clone() };
        let filler = || Found { signature: other.sign(&[b'x'; 64 << 10]), payload: vec![b'x'; 64 << 10] };
        let found: Vec<Found> = std::iter::once(good()).chain((0..15).map(|_| filler())).collect();
        let trusted = [key.trusted("k")];
        let kept = verified(DIGEST, found, &[&trusted], None, 4);
        assert_eq!(kept.len(), 1, "the 15 fillers are not kept");
        assert_eq!(kept[0].payload, p);
        // Many good ones: a few kept. Under another key set: each set's own kept.
        let others = [other.trusted("o")];
        let theirs = Found { signature: other.sign(&p), payload: p.clone() };
        let found: Vec<Found> = (0..6).map(|_| good()).chain(std::iter::once(theirs)).collect();
        assert_eq!(verified(DIGEST, found, &[&trusted], None, 4).len(), 4);
        let found = vec![good(), Found { signature: other.sign(&p), payload: p.clone() }];
        assert_eq!(verified(DIGEST, found, &[&trusted, &others], None, 4).len(), 2);
    }

    #[test]
    fn unsigned_other_keys_other_digests_and_garbage_are_refused_naming_the_keys() {
        let (key, other) = (SignKey::generate(), SignKey::generate());
        let trusted = [other.trusted("team.pub")];
        let unsigned = verify(DIGEST, &[], &trusted, None).unwrap_err();
        assert!(unsigned.contains("not signed") && unsigned.contains("team.pub"), "{unsigned}");
        let p = payload("r/x", DIGEST);
        let wrong = verify(DIGEST, &[Found { signature: key.sign(&p), payload: p.clone() }], &trusted, None).unwrap_err();
        assert!(wrong.contains("none of the trusted keys") && wrong.contains("team.pub"), "{wrong}");
        let elsewhere = payload("r/x", &DIGEST.replace("01", "02"));
        let copied = verify(DIGEST, &[Found { signature: other.sign(&elsewhere), payload: elsewhere }], &trusted, None).unwrap_err();
        assert!(copied.contains("not this artifact"), "{copied}");
        let mut tampered = p.clone();
        tampered.push(b' ');
        assert!(verify(DIGEST, &[Found { signature: other.sign(&p), payload: tampered }], &trusted, None).is_err());
        assert!(verify(DIGEST, &[Found { signature: "@@".into(), payload: p }], &trusted, None).unwrap_err().contains("not base64"));
    }

    #[test]
    fn with_identity_required_only_a_payload_naming_this_repository_verifies() {
        let key = SignKey::generate();
        let trusted = [key.trusted("k")];
        let p = payload("127.0.0.1:5000/rules/ja", DIGEST);
        let found = [Found { signature: key.sign(&p), payload: p }];
        assert!(verify(DIGEST, &found, &trusted, Some("127.0.0.1:5000/rules/ja")).is_ok());
        let elsewhere = verify(DIGEST, &found, &trusted, Some("127.0.0.1:5000/rules/copy")).unwrap_err();
        assert!(elsewhere.contains("in repository 127.0.0.1:5000/rules/ja, not 127.0.0.1:5000/rules/copy"), "{elsewhere}");
        assert!(verify(DIGEST, &found, &trusted, None).is_ok(), "without the requirement the repository is not read");
    }

    #[test]
    fn with_identity_required_a_docker_hub_signature_verifies_however_the_repository_is_written() {
        let key = SignKey::generate();
        let trusted = [key.trusted("k")];
        // What cosign writes for `docker.io/x` (go-containerregistry's name of the repository).
        for signed in ["index.docker.io/library/x", "docker.io/library/x:v1", "x"] {
            let p = payload(signed, DIGEST);
            let found = [Found { signature: key.sign(&p), payload: p }];
            for wanted in ["docker.io/library/x", "index.docker.io/x", "docker.io/x"] {
                assert!(verify(DIGEST, &found, &trusted, Some(wanted)).is_ok(), "signed as {signed}, required {wanted}");
            }
            assert!(verify(DIGEST, &found, &trusted, Some("docker.io/team/x")).is_err(), "another repository: {signed}");
        }
    }

    #[test]
    fn a_module_signed_over_its_digest_verifies_with_its_key_only_and_for_its_digest_only() {
        let (key, other) = (SignKey::generate(), SignKey::generate());
        let module = b"\0asm module";
        let digest = crate::supply::digest::digest(module);
        let signature = sign_digest(&key, &digest).unwrap();
        assert!(verify_digest(&digest, &signature, &[other.trusted("o"), key.trusted("k")]).unwrap().starts_with("k (sha256:"));
        // What `cosign sign-blob` writes: a plain ECDSA-SHA256 signature of the file's bytes.
        assert!(verify_digest(&digest, &key.sign(module), &[key.trusted("k")]).is_ok());
        let wrong = verify_digest(&digest, &signature, &[other.trusted("o")]).unwrap_err();
        assert!(wrong.contains("none of the trusted keys (o (sha256:"), "{wrong}");
        assert!(verify_digest(&crate::supply::digest::digest(b"another"), &signature, &[key.trusted("k")]).is_err());
        assert!(verify_digest(&digest, "@@", &[key.trusted("k")]).unwrap_err().contains("not base64"));
    }

    #[test]
    fn keys_round_trip_through_pem_and_encrypted_keys_are_named() {
        let key = SignKey::generate();
        let again = SignKey::from_pem("k", &key.private_pem()).unwrap();
        assert_eq!(again.public_pem(), key.public_pem());
        assert!(TrustedKey::from_pem("x", "not a key").unwrap_err().contains("x is not a PEM"));
        let encrypted = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----";
        assert!(SignKey::from_pem("cosign.key", encrypted).unwrap_err().contains("encrypted"));
    }

    #[test]
    fn the_payload_is_what_cosign_writes() {
        let p: serde_json::Value = serde_json::from_slice(&payload("reg/repo", DIGEST)).unwrap();
        assert_eq!(p["critical"]["image"]["docker-manifest-digest"], DIGEST);
        assert_eq!(p["critical"]["identity"]["docker-reference"], "reg/repo");
        assert_eq!(p["critical"]["type"], "cosign container image signature");
        assert_eq!(signature_tag(DIGEST), format!("sha256-{}.sig", &DIGEST[7..]));
    }
}
