//! A module's name in a registry: `REGISTRY/REPOSITORY[:TAG][@sha256:HEX]`.

use std::fmt;
use std::str::FromStr;

use oci_client::Reference;

/// A reference as a user wrote it. The registry must be named (`127.0.0.1:5000/rules/ja`,
/// `ghcr.io/team/rules`): a bare `rules/ja` would silently mean Docker Hub.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModuleRef {
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:<hex>`, lowercase.
    pub digest: Option<String>,
}

impl FromStr for ModuleRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bad = |why: &str| format!("`{}` is not an OCI reference REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]: {why}", crate::text::printable(s, 300));
        if s.len() > 1024 {
            return Err(bad("longer than 1024 characters"));
        }
        let Some((registry, _)) = s.split_once('/') else {
            return Err(bad("no registry (write it out: 127.0.0.1:5000/rules/ja, ghcr.io/team/rules)"));
        };
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(bad("the first part must name a registry host (with a dot or a port, or localhost)"));
        }
        let parsed = Reference::try_from(s).map_err(|e| bad(&e.to_string()))?;
        let digest = match parsed.digest() {
            Some(d) => {
                let hex = crate::supply::digest::hex_of(d).ok_or_else(|| bad("only sha256 digests are accepted"))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(bad("a sha256 digest has 64 hex digits"));
                }
                Some(crate::supply::digest::from_hex(hex))
            }
            None => None,
        };
        // oci-spec fills in `latest` when neither a tag nor a digest is given: say it.
        let tag = parsed.tag().map(str::to_owned).or_else(|| digest.is_none().then(|| "latest".to_owned()));
        Ok(ModuleRef { registry: parsed.registry().to_owned(), repository: parsed.repository().to_owned(), tag, digest })
    }
}

impl fmt::Display for ModuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl ModuleRef {
    /// `REGISTRY/REPOSITORY`, what a signature names.
    pub fn repository_name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The same artifact pinned: `REGISTRY/REPOSITORY@DIGEST` (what serves, and is shown).
    pub fn pinned(&self, digest: &str) -> ModuleRef {
        ModuleRef { registry: self.registry.clone(), repository: self.repository.clone(), tag: None, digest: Some(digest.into()) }
    }

    /// Another tag in the same repository (a signature's `sha256-<hex>.sig`).
    pub fn with_tag(&self, tag: &str) -> ModuleRef {
        ModuleRef { registry: self.registry.clone(), repository: self.repository.clone(), tag: Some(tag.into()), digest: None }
    }

    /// Whether this reference can point elsewhere later (it names no digest).
    pub fn is_tag(&self) -> bool {
        self.digest.is_none()
    }

    pub fn to_oci(&self) -> Reference {
        match (&self.tag, &self.digest) {
            (_, Some(digest)) => Reference::with_digest(self.registry.clone(), self.repository.clone(), digest.clone()),
            (Some(tag), None) => Reference::with_tag(self.registry.clone(), self.repository.clone(), tag.clone()),
            (None, None) => Reference::with_tag(self.registry.clone(), self.repository.clone(), "latest".into()),
        }
    }
}

/// A repository as containers/image names it whatever the spelling: a `docker-reference` (a
/// signature's) or a pull reference, its tag and digest dropped, Docker Hub written out
/// (`x`, `library/x`, `index.docker.io/x` and `docker.io/library/x:tag` are all
/// `docker.io/library/x`), the host in lowercase. Two references name one repository if they
/// give the same (cosign writes `index.docker.io/...` for what a user writes `docker.io/...`).
pub fn canonical_repository(reference: &str) -> String {
    let reference = reference.trim();
    let named = reference.split_once('@').map_or(reference, |(name, _)| name);
    // A tag follows the last `/` (a `:` before it is a host's port).
    let named = match named.rfind(':') {
        Some(colon) if !named[colon..].contains('/') => &named[..colon],
        _ => named,
    };
    let (host, path) = match named.split_once('/') {
        Some((first, rest)) if first.contains('.') || first.contains(':') || first == "localhost" => (first.to_ascii_lowercase(), rest),
        _ => (DOCKER_HUB.to_string(), named),
    };
    let host = canonical_host(&host);
    if host == DOCKER_HUB && !path.contains('/') {
        return format!("{host}/library/{path}");
    }
    format!("{host}/{path}")
}

/// A registry host as containers/image names it: in lowercase, Docker Hub's other spellings
/// (`index.docker.io`, where `docker login` files its credentials, and `registry-1.docker.io`)
/// written `docker.io`.
pub fn canonical_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    if LEGACY_DOCKER_HUB.contains(&host.as_str()) { DOCKER_HUB.to_string() } else { host }
}

/// Docker Hub, as containers/image writes it; and how else it is written.
const DOCKER_HUB: &str = "docker.io";
const LEGACY_DOCKER_HUB: [&str; 2] = ["index.docker.io", "registry-1.docker.io"];

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "3075915c3075915c3075915c3075915c3075915c3075915c3075915c3075915c";

    #[test]
    fn parses_tags_digests_and_both() {
        let r: ModuleRef = "127.0.0.1:5000/rules/ja:v1".parse().unwrap();
        assert_eq!((r.registry.as_str(), r.repository.as_str(), r.tag.as_deref(), r.digest.as_deref()), ("127.0.0.1:5000", "rules/ja", Some("v1"), None));
        assert!(r.is_tag());
        let r: ModuleRef = format!("ghcr.io/team/rules@sha256:{}", HEX.to_uppercase()).parse().unwrap();
        assert_eq!(r.digest.as_deref(), Some(format!("sha256:{HEX}").as_str()));
        assert_eq!(r.to_string(), format!("ghcr.io/team/rules@sha256:{HEX}"));
        let r: ModuleRef = "localhost/x".parse().unwrap();
        assert_eq!(r.tag.as_deref(), Some("latest"));
        assert_eq!(r.pinned(&format!("sha256:{HEX}")).to_string(), format!("localhost/x@sha256:{HEX}"));
    }

    #[test]
    fn refuses_what_would_silently_mean_something_else() {
        for bad in ["rules/ja", "ja", "127.0.0.1:5000/rules@sha512:00", "127.0.0.1:5000/rules@sha256:abc", "127.0.0.1:5000/Rules", ""] {
            let e = bad.parse::<ModuleRef>().unwrap_err();
            assert!(e.contains("is not an OCI reference"), "{bad}: {e}");
        }
        let long = format!("127.0.0.1:5000/{}", "a".repeat(2000));
        assert!(long.parse::<ModuleRef>().unwrap_err().contains("1024"));
    }

    #[test]
    fn docker_hub_and_its_spellings_name_one_repository_with_or_without_a_tag_or_digest() {
        let hub = "docker.io/library/x";
        let digest = format!("@sha256:{HEX}");
        for spelling in ["x", "library/x", "docker.io/x", "docker.io/library/x", "index.docker.io/x", "index.docker.io/library/x", "Docker.IO/x", "registry-1.docker.io/library/x"] {
            for suffix in ["", ":v1", digest.as_str(), &format!(":v1{digest}")] {
                assert_eq!(canonical_repository(&format!("{spelling}{suffix}")), hub, "{spelling}{suffix}");
            }
        }
        assert_eq!(canonical_repository("team/x:v1"), "docker.io/team/x");
        assert_eq!(canonical_repository("index.docker.io/team/x"), "docker.io/team/x");
        // A port is not a tag; other registries are as written (their host in lowercase).
        assert_eq!(canonical_repository("127.0.0.1:5000/rules/ja:v1"), "127.0.0.1:5000/rules/ja");
        assert_eq!(canonical_repository("localhost:5000/ja"), "localhost:5000/ja");
        assert_eq!(canonical_repository("GHCR.io/team/rules@sha256:00"), "ghcr.io/team/rules");
        for (a, b) in [("docker.io/library/x", "docker.io/team/x"), ("ghcr.io/x", "docker.io/x"), ("quay.io/library/x", "x")] {
            assert_ne!(canonical_repository(a), canonical_repository(b), "{a} vs {b}");
        }
        // What the parser makes of a Docker Hub reference names the same repository.
        let parsed: ModuleRef = "docker.io/x:v1".parse().unwrap();
        assert_eq!(canonical_repository(&parsed.repository_name()), hub);
    }
}
