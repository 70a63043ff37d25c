//! Text that reaches the cluster, a log or a terminal from elsewhere (a module, the API
//! server): bounded and without control characters.

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate_bytes(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// At most `max` bytes of `s`, control characters escaped (`\u{1b}`), `…` where it was cut.
pub fn printable(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max));
    for c in s.chars() {
        let piece: String = if c.is_control() { c.escape_default().collect() } else { c.into() };
        if out.len() + piece.len() > max.saturating_sub('…'.len_utf8()) {
            out.push('…');
            return out;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_character_boundaries_and_escapes_controls() {
        assert_eq!(truncate_bytes("ズンドコ", 7), "ズン");
        assert_eq!(truncate_bytes("abc", 7), "abc");
        assert_eq!(printable("red \x1b[31m!", 100), "red \\u{1b}[31m!");
        let long = printable(&"キ".repeat(1000), 1024);
        assert!(long.len() <= 1024 && long.ends_with('…'), "{}", long.len());
        assert_eq!(printable("a\nb", 100), "a\\nb");
    }
}
