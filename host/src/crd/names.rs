//! The names Kubernetes allows (RFC 1123), as the API server checks them: what the operator
//! writes into a manifest (`grant-reads`) or reads back from its own files (a cache owner
//! record's tenant) is held to the same rule.

/// A DNS label (a namespace's name): 1 to 63 of `a-z`, `0-9` and `-`, a letter or digit at
/// each end.
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let ends = |b: Option<&u8>| b.is_some_and(|b| *b != b'-');
    (1..=63).contains(&bytes.len()) && bytes.iter().all(allowed) && ends(bytes.first()) && ends(bytes.last())
}

/// A DNS subdomain (most objects' names): at most 253, labels of `a-z`, `0-9` and `-` (each a
/// letter or digit at both ends, none empty) joined by `.`.
pub fn is_dns_subdomain(name: &str) -> bool {
    (1..=253).contains(&name.len()) && name.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_at_their_limits_pass_and_one_past_them_fails() {
        assert!(is_dns_label(&"a".repeat(63)) && !is_dns_label(&"a".repeat(64)));
        let longest = format!("{}.{}.{}.{}", "b".repeat(63), "c".repeat(63), "d".repeat(63), "e".repeat(61));
        assert!(is_dns_subdomain(&longest) && !is_dns_subdomain(&format!("{longest}x")));
        for bad in ["", "-a", "a-", "A", "a_b", "a.b"] {
            assert!(!is_dns_label(bad), "{bad:?}");
        }
        for bad in ["", "a..b", ".a", "a.", "a.-b", "Rules"] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
        assert!(is_dns_subdomain("rules-a.v1") && is_dns_label("team-a"));
    }
}
