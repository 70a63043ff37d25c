//! Child names: the one place that knows how a Hikawa's children are named. The rules use it
//! to name what they create, the host to check plans and to read indexes back from names.

/// `<hikawa>-zundoko-007`: the index, zero-padded to at least three digits.
pub fn zundoko_name(hikawa: &str, index: u32) -> String {
    format!("{hikawa}-zundoko-{index:03}")
}

/// `<hikawa>-kiyoshi`.
pub fn kiyoshi_name(hikawa: &str) -> String {
    format!("{hikawa}-kiyoshi")
}

/// The index encoded in a Zundoko's name, if the name is one this Hikawa would use.
pub fn zundoko_index(hikawa: &str, child_name: &str) -> Option<u32> {
    let digits = child_name.strip_prefix(hikawa)?.strip_prefix("-zundoko-")?;
    if digits.len() < 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let index: u32 = digits.parse().ok()?;
    // Exactly the canonical spelling: `-0007` is not index 7's name.
    (index >= 1 && zundoko_name(hikawa, index) == child_name).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for index in [1, 7, 99, 100, 999, 1000, 12345] {
            let name = zundoko_name("hikawa-sample", index);
            assert_eq!(zundoko_index("hikawa-sample", &name), Some(index), "{name}");
        }
        assert_eq!(zundoko_name("h", 7), "h-zundoko-007");
        assert_eq!(zundoko_name("h", 1234), "h-zundoko-1234");
        assert_eq!(kiyoshi_name("h"), "h-kiyoshi");
    }

    #[test]
    fn foreign_names_have_no_index() {
        for name in [
            "h-zundoko-07",
            "h-zundoko-0007",
            "h-zundoko-000",
            "h-zundoko-abc",
            "other-zundoko-001",
            "h-kiyoshi",
            "hh-zundoko-001",
            "h-zundoko--01",
        ] {
            assert_eq!(zundoko_index("h", name), None, "{name}");
        }
        // A Hikawa whose name extends another's does not claim its children.
        assert_eq!(zundoko_index("h-zundoko", "h-zundoko-001"), None);
    }
}
