//! The one spelling of a digest: `sha256:<hex>`, lowercase. Every digest the operator forms
//! (a module's, a blob's, a manifest's, a pin, a key's fingerprint) is formed here; it imports
//! nothing, so every part of the module supply may call it.

use sha2::{Digest as _, Sha256};

/// What every digest starts with: only SHA-256 is accepted.
pub const PREFIX: &str = "sha256:";

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    from_hex(&hex::encode(Sha256::digest(bytes)))
}

/// `sha256:` and `hex`, lowercased (a digest written out, once its hex is checked).
pub fn from_hex(hex: &str) -> String {
    format!("{PREFIX}{}", hex.to_ascii_lowercase())
}

/// The hex of a `sha256:<hex>` digest, if it is one (the hex not checked).
pub fn hex_of(digest: &str) -> Option<&str> {
    digest.strip_prefix(PREFIX)
}

/// A pin as given (`<hex>` or `sha256:<hex>`, any case) in the form digests take.
pub fn normalize_pin(pin: &str) -> String {
    let pin = pin.trim().to_ascii_lowercase();
    from_hex(hex_of(&pin).unwrap_or(&pin))
}

/// A short fingerprint: `sha256:` and the first 16 hex digits of the digest of `bytes`.
pub fn fingerprint(bytes: &[u8]) -> String {
    digest(bytes)[..PREFIX.len() + 16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling() {
        let empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(digest(b""), empty);
        assert_eq!(from_hex(&empty[7..].to_uppercase()), empty);
        assert_eq!(hex_of(empty), Some(&empty[7..]));
        assert_eq!(hex_of("sha512:00"), None);
        assert_eq!(normalize_pin(&format!("  {}\n", &empty[7..].to_uppercase())), empty);
        assert_eq!(normalize_pin(&empty.to_uppercase()), empty);
        assert_eq!(fingerprint(b""), "sha256:e3b0c44298fc1c14");
    }
}
