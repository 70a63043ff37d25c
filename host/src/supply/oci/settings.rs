//! How the operator talks to registries: the settings every pull and push is made with (from
//! the flags), and which registries `--allowed-registries` allows.

use std::path::PathBuf;
use std::time::Duration;

use super::signature::TrustedKey;

/// How the operator talks to registries.
#[derive(Clone, Debug)]
pub struct RegistrySettings {
    /// `HOST:PORT`s spoken to over plain HTTP (tests, a registry on loopback); TLS elsewhere.
    pub insecure: Vec<String>,
    /// The longest one try of a pull or resolve may take, every request in it included.
    pub timeout: Duration,
    /// Tries of a pull that failed for a reason that may pass (unreachable, 429, 5xx).
    pub tries: u32,
    /// The largest module layer accepted (refused from its descriptor, before a byte is read).
    pub max_module_bytes: u64,
    /// Tries of pulls at once from any one registry, across every rule set (per registry: a
    /// registry that never answers holds only its own, see `permits.rs`).
    pub concurrent_pulls: usize,
    /// Tries of pulls at once across every registry (`--max-pulls-in-flight`): N registries
    /// that never answer hold at most this many, not N times `concurrent_pulls`.
    pub max_pulls_in_flight: usize,
    /// Where pulled blobs are kept (`DIR/oci/`); nothing is kept without it.
    pub cache_dir: Option<PathBuf>,
    /// The most the cache may hold (every file under it: blobs, compiled code, tag and
    /// signature records), `--cache-max-mib`: the least recently used is collected, never what
    /// serves.
    pub cache_max_bytes: u64,
    /// With any, a module serves only if a signature by one of them verifies.
    pub trusted_keys: Vec<TrustedKey>,
    /// Where `trusted_keys` were read from (`--trusted-keys`), read again as they change
    /// (by the rule set controller, every [`KEYS_POLL`](super::keys::KEYS_POLL)); none: fixed.
    pub trusted_key_paths: Vec<PathBuf>,
    /// PEM certificates of certificate authorities trusted beside the system's (a registry
    /// with a certificate from an internal CA).
    pub extra_ca_pem: Vec<Vec<u8>>,
    /// `--require-signatures`: a module from a file or a ConfigMap serves only if a signature
    /// by a trusted key is carried beside it (needs trusted keys).
    pub require_signatures: bool,
    /// `HOST[:PORT]` patterns (`*` matches any run of characters in the host; a pattern
    /// without a port matches only a reference without one, `HOST:*` any port): with any, a
    /// reference naming another registry is refused before anything is asked or read, and so is
    /// a redirect target or a token realm on a host they do not allow (other than the
    /// registry's own). None: every registry.
    pub allowed: Vec<String>,
    /// `--trusted-token-realm` `HOST[:PORT]`s: token realms on another host than their
    /// registry's that may be at an internal address and are given the registry's credentials.
    pub trusted_realms: Vec<String>,
    /// `--min-poll-secs`: a rule set's followed tag is resolved again no more often than this,
    /// whatever its `pollSeconds` says (each new artifact is pulled and kept).
    pub min_poll: Duration,
    /// How long a tag record no source names is kept once the rule sets are listed
    /// (`tag_records.rs`, [`GRACE`](super::tag_records::GRACE); no flag: tests shorten it).
    pub tag_record_grace: Duration,
}

impl Default for RegistrySettings {
    fn default() -> Self {
        RegistrySettings {
            insecure: Vec::new(),
            timeout: Duration::from_secs(30),
            tries: 3,
            max_module_bytes: 64 << 20,
            concurrent_pulls: 2,
            max_pulls_in_flight: super::permits::DEFAULT_MAX_PULLS_IN_FLIGHT,
            cache_dir: None,
            cache_max_bytes: crate::supply::disk_cache::DEFAULT_MAX_MIB << 20,
            trusted_keys: Vec::new(),
            trusted_key_paths: Vec::new(),
            extra_ca_pem: Vec::new(),
            require_signatures: false,
            allowed: Vec::new(),
            trusted_realms: Vec::new(),
            min_poll: super::registry::DEFAULT_MIN_POLL,
            tag_record_grace: super::tag_records::GRACE,
        }
    }
}

/// Whether `registry` (`HOST[:PORT]`) is one `pattern` allows (see `RegistrySettings::allowed`).
pub fn registry_allowed(pattern: &str, registry: &str) -> bool {
    fn split(s: &str) -> (&str, Option<&str>) {
        // An IPv6 literal keeps its colons inside brackets.
        match s.rfind(':') {
            Some(i) if !s[i..].contains(']') => (&s[..i], Some(&s[i + 1..])),
            _ => (s, None),
        }
    }
    fn glob(pattern: &[u8], text: &[u8]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some((b'*', rest)) => (0..=text.len()).any(|i| glob(rest, &text[i..])),
            Some((c, rest)) => text.first().is_some_and(|t| t.eq_ignore_ascii_case(c)) && glob(rest, &text[1..]),
        }
    }
    let (pattern, registry) = (pattern.trim(), registry.trim());
    let ((p_host, p_port), (host, port)) = (split(pattern), split(registry));
    let port_ok = match (p_port, port) {
        (Some("*"), _) => true,
        (p, r) => p == r,
    };
    port_ok && glob(p_host.as_bytes(), host.as_bytes())
}
