//! Which origins a pull may speak to (threat model: "A registry"). A redirect's target and a
//! bearer challenge's token realm are origins the registry chose, not the operator: each is held
//! to the rules of a registry before a byte is sent to it.
//! - https, or plain http only to an origin `--insecure-registry` names;
//! - with `--allowed-registries`, a host it allows or the registry's own host (any port);
//! - a token realm on another host than the registry's gets no credentials and is never
//!   connected to at a loopback, link-local or private address, unless `--trusted-token-realm`
//!   names it (a self-hosted registry whose token service is another internal host, as GitLab's
//!   `registry.gitlab.example.com` and `gitlab.example.com` are). A realm named by its address is
//!   checked here; one named by a host name is checked by [`PublicOnly`], at the resolution its
//!   connection uses (so a name that answers a public address to a check and an internal one to
//!   the connection cannot pass).

use std::net::{IpAddr, SocketAddr};

use super::registry::registry_allowed;

/// `HOST[:PORT]` of a URL (the port only when it is not the scheme's default).
pub(super) fn origin(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// `SCHEME://HOST[:PORT]` of a URL, escaped, for a message.
pub(super) fn shown(url: &reqwest::Url) -> String {
    format!("{}://{}", crate::text::printable(url.scheme(), 16), crate::text::printable(&origin(url), 100))
}

/// Whether two URLs are one origin: scheme, host and port.
pub(super) fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    a.scheme() == b.scheme() && a.host_str() == b.host_str() && a.port_or_known_default() == b.port_or_known_default()
}

/// Whether `url` may be spoken to: https, or plain http to an origin `insecure` names.
pub(super) fn secure_or_named(url: &reqwest::Url, insecure: &[String]) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => insecure.iter().any(|o| o.eq_ignore_ascii_case(&origin(url))),
        _ => false,
    }
}

/// Whether `host` is the registry's own host. Docker Hub's registry (`registry-1.docker.io`)
/// hands out tokens from `auth.docker.io`, the same service's.
fn registry_s_own(host: &str, registry_host: &str) -> bool {
    host.eq_ignore_ascii_case(registry_host) || (registry_host.eq_ignore_ascii_case("registry-1.docker.io") && host.eq_ignore_ascii_case("auth.docker.io"))
}

/// An address inside a network rather than on the internet: loopback, link-local (the cloud
/// metadata service's 169.254.169.254 among them), private (RFC 1918, IPv6 unique local),
/// shared (RFC 6598, a carrier's or a cluster's), unspecified or broadcast.
pub(super) fn internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified() || v4.is_broadcast() || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => internal(IpAddr::V4(v4)),
            None => {
                let first = v6.segments()[0];
                v6.is_loopback() || v6.is_unspecified() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
            }
        },
    }
}

/// How a token realm may be asked.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RealmUse {
    /// The registry's credentials go with the request: the realm is on the registry's own host,
    /// or `--trusted-token-realm` names it.
    pub credentials: bool,
    /// Its name is resolved by [`PublicOnly`]: on another host, not trusted.
    pub public_only: bool,
}

/// The origins a pull may speak to beside the registry a reference names.
#[derive(Clone, Debug, Default)]
pub(super) struct Origins {
    /// `--insecure-registry`: the origins spoken to over plain http.
    pub insecure: Vec<String>,
    /// `--allowed-registries` patterns (none: any host).
    pub allowed: Vec<String>,
    /// `--trusted-token-realm`: realms on another host given the credentials, at any address.
    pub trusted_realms: Vec<String>,
}

impl Origins {
    fn allowed(&self, url: &reqwest::Url, registry_host: &str) -> bool {
        self.allowed.is_empty() || registry_s_own(url.host_str().unwrap_or(""), registry_host) || self.allowed.iter().any(|p| registry_allowed(p, &origin(url)))
    }

    /// Why a redirect from the registry at `registry` to `url` is refused, if it is.
    pub fn redirect_refusal(&self, url: &reqwest::Url, registry: &reqwest::Url) -> Option<String> {
        if !secure_or_named(url, &self.insecure) {
            return Some(format!("a redirect to {} refused: plain http to an origin --insecure-registry does not name", shown(url)));
        }
        if !self.allowed(url, registry.host_str().unwrap_or("")) {
            return Some(format!("a redirect to {} refused: --allowed-registries does not allow its host", shown(url)));
        }
        None
    }

    /// Whether, and how, the token realm `url` may be asked for a token for the registry on
    /// `registry_host`; why not, naming the realm.
    pub fn realm(&self, url: &reqwest::Url, registry_host: &str) -> Result<RealmUse, String> {
        let refused = |why: &str| Err(format!("the token realm {} refused: {why}", shown(url)));
        if !secure_or_named(url, &self.insecure) {
            return refused("plain http to an origin --insecure-registry does not name");
        }
        if !self.allowed(url, registry_host) {
            return refused("not the registry's host, and --allowed-registries does not allow it");
        }
        let trusted = self.trusted_realms.iter().any(|t| t.eq_ignore_ascii_case(&origin(url)));
        if trusted || registry_s_own(url.host_str().unwrap_or(""), registry_host) {
            return Ok(RealmUse { credentials: true, public_only: false });
        }
        // An IPv6 literal's host is written in brackets.
        let address = url.host_str().unwrap_or("").trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok();
        if address.is_some_and(internal) {
            return refused("an internal address on another host than the registry's, which --trusted-token-realm does not name");
        }
        Ok(RealmUse { credentials: false, public_only: true })
    }
}

/// Why a token realm's name was refused (it resolved to internal addresses only), found again
/// in reqwest's error.
#[derive(Debug)]
pub(super) struct RealmRefused(pub String);

impl std::fmt::Display for RealmRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RealmRefused {}

/// The resolver of the client that asks untrusted realms on another host: only public
/// addresses are connected to; a name with none is refused, naming it.
pub(super) struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found.into_iter().filter(|a| !internal(a.ip())).collect();
            if public.is_empty() {
                let why = format!(
                    "{} resolves only to internal addresses, on another host than the registry's, which --trusted-token-realm does not name",
                    crate::text::printable(&host, 100)
                );
                return Err(Box::new(RealmRefused(why)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> reqwest::Url {
        reqwest::Url::parse(u).unwrap()
    }

    #[test]
    fn only_https_or_named_origins_are_spoken_to() {
        let named = vec!["127.0.0.1:5000".to_string()];
        let ok = |u: &str| secure_or_named(&url(u), &named);
        assert!(ok("https://elsewhere.io/x") && ok("http://127.0.0.1:5000/v2/"));
        assert!(!ok("http://127.0.0.1:5001/internal") && !ok("http://169.254.169.254/") && !ok("ftp://127.0.0.1:5000/"));
    }

    #[test]
    fn internal_addresses_are_told_from_public_ones() {
        for ip in ["127.0.0.2", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:10.0.0.1"] {
            assert!(internal(ip.parse().unwrap()), "{ip} is internal");
        }
        for ip in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:4860::8888", "::ffff:8.8.8.8"] {
            assert!(!internal(ip.parse().unwrap()), "{ip} is public");
        }
    }

    #[test]
    fn a_realm_is_held_to_the_rules_of_a_registry() {
        let origins = Origins { insecure: vec!["10.0.0.5".into()], allowed: vec![], trusted_realms: vec!["gitlab.example.com".into()] };
        let realm = |u: &str, registry: &str| origins.realm(&url(u), registry);
        let (with, without) = (RealmUse { credentials: true, public_only: false }, RealmUse { credentials: false, public_only: true });
        // The registry's own host, any port: credentials, any address.
        assert_eq!(realm("https://ghcr.io/token", "ghcr.io"), Ok(with.clone()));
        assert_eq!(realm("https://10.0.0.5:8443/token", "10.0.0.5"), Ok(with.clone()));
        assert_eq!(realm("https://auth.docker.io/token", "registry-1.docker.io"), Ok(with.clone()));
        // Another host: no credentials, public addresses only, unless trusted (GitLab's).
        assert_eq!(realm("https://auth.elsewhere.io/token", "registry.io"), Ok(without));
        assert_eq!(realm("https://gitlab.example.com/jwt/auth", "registry.gitlab.example.com"), Ok(with.clone()));
        let refused = realm("https://169.254.169.254/latest/meta-data", "registry.io").unwrap_err();
        assert!(refused.contains("https://169.254.169.254") && refused.contains("--trusted-token-realm"), "{refused}");
        assert!(realm("https://[::ffff:127.0.0.1]:9000/", "registry.io").is_err());
        // Plain http only to an origin --insecure-registry names, whichever host.
        let refused = realm("http://ghcr.io/token", "ghcr.io").unwrap_err();
        assert!(refused.contains("the token realm http://ghcr.io refused") && refused.contains("--insecure-registry"), "{refused}");
        assert!(realm("http://10.0.0.5/token", "10.0.0.5").is_ok() && realm("http://10.0.0.5:81/token", "10.0.0.5").is_err());
        // The allow-list: the registry's own host, or one it allows (trusted or not).
        let origins = Origins { allowed: vec!["registry.io".into(), "*.auth.io".into()], trusted_realms: vec!["gitlab.example.com".into()], ..Origins::default() };
        let realm = |u: &str| origins.realm(&url(u), "registry.io");
        assert!(realm("https://registry.io:8443/token").is_ok() && realm("https://a.auth.io/token").is_ok());
        for refused in ["https://elsewhere.io/token", "https://gitlab.example.com/jwt/auth"] {
            assert!(realm(refused).unwrap_err().contains("--allowed-registries does not allow it"), "{refused}");
        }
    }

    #[test]
    fn a_redirect_is_held_to_the_allow_list_too() {
        let origins = Origins { insecure: vec!["127.0.0.1:5001".into()], allowed: vec!["registry.io".into(), "cdn.io".into()], ..Origins::default() };
        let from = url("https://registry.io/v2/x/blobs/sha256:0");
        let refusal = |u: &str| origins.redirect_refusal(&url(u), &from);
        assert_eq!(refusal("https://cdn.io/blob"), None);
        assert_eq!(refusal("https://registry.io:8443/blob"), None);
        assert!(refusal("https://elsewhere.io/blob").unwrap().contains("--allowed-registries does not allow its host"));
        assert!(refusal("http://cdn.io/blob").unwrap().contains("--insecure-registry does not name"));
        // Without an allow-list, any https origin.
        assert_eq!(Origins::default().redirect_refusal(&url("https://elsewhere.io/blob"), &from), None);
    }

    #[test]
    fn origins_are_scheme_host_and_port() {
        assert!(same_origin(&url("https://r.io/v2/"), &url("https://r.io:443/x")));
        assert!(!same_origin(&url("https://r.io/"), &url("http://r.io/")) && !same_origin(&url("https://r.io/"), &url("https://r.io:8443/")));
        assert!(!same_origin(&url("https://r.io/"), &url("https://cdn.r.io/")));
    }
}
