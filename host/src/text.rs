//! Text that reaches the cluster, a log or a terminal from elsewhere (a module, the API
//! server): bounded in bytes, with control characters (ANSI escapes, newlines) and bidi
//! overrides escaped.

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
        let piece: String = if is_unsafe(c) { c.escape_unicode().collect() } else { c.into() };
        if out.len() + piece.len() > max.saturating_sub('…'.len_utf8()) {
            out.push('…');
            return out;
        }
        out.push_str(&piece);
    }
    out
}

/// Characters that change what a terminal or a log viewer shows rather than being shown:
/// C0/C1 controls (escape sequences, newlines) and the bidirectional overrides and isolates
/// (which reorder the text around them).
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_on_character_boundaries_and_escapes_controls() {
        assert_eq!(truncate_bytes("ズンドコ", 7), "ズン");
        assert_eq!(truncate_bytes("abc", 7), "abc");
        assert_eq!(printable("red \x1b[31m!", 100), "red \\u{1b}[31m!");
        assert_eq!(printable("a\nb\u{202e}c", 100), "a\\u{a}b\\u{202e}c");
        let long = printable(&"キ".repeat(1000), 1024);
        assert!(long.len() <= 1024 && long.ends_with('…'), "{}", long.len());
        assert_eq!(printable("ズンドコ", 100), "ズンドコ");
        assert_eq!(printable("xxxxxxxxxx", 8), "xxxxx…");
    }
}
