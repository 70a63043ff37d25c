//! Go's `%q` of a string (strconv.Quote), which kube-apiserver's messages quote names and values
//! with: `hikawas.zundokokiyoshi.kaitoy.github.com "a" not found`. Rust's `{:?}` agrees for
//! plain names but not for what a careless or hostile client sends: it writes `\0` and `\u{1b}`
//! where Go writes `\x00` and `\x1b`, and escapes combining marks Go prints as they are.

use std::fmt;

/// `s` as Go's `%q` prints it.
pub fn quote(s: &str) -> String {
    Quoted(s).to_string()
}

/// Go's `%q` of a []string: `["a" "b"]`.
pub fn quote_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|i| quote(i)).collect::<Vec<_>>().join(" "))
}

/// Displays its string as Go's `%q` does.
pub struct Quoted<'a>(pub &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write;
        f.write_char('"')?;
        for c in self.0.chars() {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                c if is_print(c) => f.write_char(c)?,
                '\x07' => f.write_str("\\a")?,
                '\x08' => f.write_str("\\b")?,
                '\x0c' => f.write_str("\\f")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\x0b' => f.write_str("\\v")?,
                c if c < ' ' || c == '\x7f' => write!(f, "\\x{:02x}", c as u32)?,
                c if (c as u32) < 0x10000 => write!(f, "\\u{:04x}", c as u32)?,
                c => write!(f, "\\U{:08x}", c as u32)?,
            }
        }
        f.write_char('"')
    }
}

/// unicode.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space; not
/// controls, format characters, private use, unassigned code points or other spaces.
/// Rust's own table draws the same line (core's printable.py leaves out Cc, Cf, Cs, Co, Cn,
/// Zl, Zp and Zs but the space); `str::escape_debug` consults it, and escapes a combining
/// mark only at the start of a string, so a mark after `a` is printed as Go prints it. The
/// tables' Unicode versions differ (Rust's newer than the Go kube-apiserver is built with):
/// a code point assigned since (U+31EF, Garay) is printed here where Go escapes it.
fn is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..'\x7f').contains(&c);
    }
    let probe = format!("a{c}");
    let mut escaped = probe.escape_debug().skip(1);
    escaped.next() == Some(c) && escaped.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_strconv_quote_does() {
        for (s, go) in [
            ("bob", r#""bob""#),
            ("", r#""""#),
            ("say \"hi\" \\ 'x'", r#""say \"hi\" \\ 'x'""#),
            ("\0\x01\x1b\x7f", r#""\x00\x01\x1b\x7f""#),
            ("\x07\x08\x0c\n\r\t\x0b", r#""\a\b\f\n\r\t\v""#),
            ("é日本😀", "\"é日本😀\""),
            ("a\u{301}", "\"a\u{301}\""),
            ("\u{301}", "\"\u{301}\""),
            ("\u{85}\u{a0}\u{ad}", r#""\u0085\u00a0\u00ad""#),
            ("\u{200b}\u{202e}\u{2028}\u{3000}\u{feff}", r#""\u200b\u202e\u2028\u3000\ufeff""#),
            ("\u{e000}\u{10ffff}\u{e0001}", r#""\ue000\U0010ffff\U000e0001""#),
        ] {
            assert_eq!(quote(s), go, "{s:?}");
        }
        assert_eq!(quote_list(&["a".into(), "b\n".into()]), r#"["a" "b\n"]"#);
    }

    #[test]
    fn agrees_with_rusts_debug_on_printable_ascii_without_a_backslash() {
        let printable: String = (' '..'\x7f').filter(|c| *c != '\\' && *c != '\'').collect();
        assert_eq!(quote(&printable), format!("{printable:?}"));
    }
}
