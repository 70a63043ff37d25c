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
}
