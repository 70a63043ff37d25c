//! Bounds on a module's `info()` (SPEC 4b): the name, version and description go into every
//! Hikawa's status, Events, metric labels and `check`'s output, so a module whose metadata is
//! too long or not printable is refused at load.

use zundoko_rules::ModuleInfo;

use super::error::GuestError;
use crate::text::{is_unsafe, printable};

/// Longest name: an identifier (letters, digits, `-`, `_`, `.`), short enough for a label.
pub const MAX_NAME_BYTES: usize = 64;
/// Longest version: semver and its build metadata (letters, digits, `.`, `-`, `+`).
pub const MAX_VERSION_BYTES: usize = 32;
/// Longest description: one line of printable text, any script.
pub const MAX_DESCRIPTION_BYTES: usize = 256;
/// How much of a refused value an error message quotes (escaped).
const QUOTE_BYTES: usize = 40;

/// Refuse metadata outside the bounds, naming the field and why.
pub fn check(info: &ModuleInfo) -> Result<(), GuestError> {
    let identifier = |extra: &'static str| move |c: char| c.is_ascii_alphanumeric() || extra.contains(c);
    field("name", &info.name, MAX_NAME_BYTES, false, "letters, digits, '-', '_' and '.'", identifier("-_."))?;
    field("version", &info.version, MAX_VERSION_BYTES, false, "letters, digits, '.', '-' and '+'", identifier(".-+"))?;
    field("description", &info.description, MAX_DESCRIPTION_BYTES, true, "printable text on one line", |c| !is_unsafe(c))
}

fn field(
    field: &'static str,
    value: &str,
    max: usize,
    may_be_empty: bool,
    allowed: &str,
    ok: impl Fn(char) -> bool,
) -> Result<(), GuestError> {
    let bad = |why: String| Err(GuestError::BadModuleMetadata { field, why, value: printable(value, QUOTE_BYTES) });
    if value.is_empty() && !may_be_empty {
        return bad("empty".into());
    }
    if value.len() > max {
        return bad(format!("{} bytes, more than {max}", value.len()));
    }
    if let Some((at, c)) = value.char_indices().find(|&(_, c)| !ok(c)) {
        return bad(format!("has {} (U+{:04X}) at byte {at}: only {allowed}", describe(c), c as u32));
    }
    Ok(())
}

fn describe(c: char) -> &'static str {
    if is_unsafe(c) { "a control character" } else { "a character not allowed" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, version: &str, description: &str) -> ModuleInfo {
        ModuleInfo { name: name.into(), version: version.into(), description: description.into() }
    }

    #[test]
    fn shipped_style_metadata_passes() {
        check(&info("zundoko-strict-ja", "0.1.0", "ズン or ドコ at random; キ・ヨ・シ！ only after exactly four ズン then ドコ")).unwrap();
        check(&info("my_rules.v2", "1.0.0-rc.1+build.7", "")).unwrap();
    }

    #[test]
    fn each_bound_names_the_field_and_quotes_only_an_escaped_prefix() {
        let huge = "x".repeat(8 << 20);
        for (info, field, needle) in [
            (info(&huge, "1", ""), "name", "8388608 bytes, more than 64"),
            (info("evil\x1b[31mred", "1", ""), "name", "a control character (U+001B) at byte 4"),
            (info("", "1", ""), "name", "empty"),
            (info("a b", "1", ""), "name", "(U+0020) at byte 1"),
            (info("ok", &"1".repeat(33), ""), "version", "33 bytes, more than 32"),
            (info("ok", "1", "two\nlines"), "description", "a control character (U+000A)"),
            (info("ok", "1", "\u{202e}reversed"), "description", "U+202E"),
            (info("ok", "1", &"d".repeat(257)), "description", "257 bytes, more than 256"),
        ] {
            let error = check(&info).unwrap_err();
            assert_eq!(error.reason(), "BadModuleMetadata");
            let message = error.to_string();
            assert!(message.contains(&format!("info() {field} ")) && message.contains(needle), "{message}");
            assert!(message.len() < 250 && !message.chars().any(is_unsafe), "{message:?}");
        }
    }
}
