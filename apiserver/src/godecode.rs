//! What Go's standard library says about bytes kube-apiserver decodes: `[]byte` fields in JSON
//! (base64.StdEncoding, as encoding/json decodes them) and `json.Unmarshal` into a
//! `map[string]interface{}` (how ValidateSecret checks a docker config), with Go's error texts.

/// base64.StdEncoding.Decode: the standard alphabet with padding, `\r` and `\n` ignored
/// anywhere, non-zero trailing bits accepted (the encoding is not strict). The error is Go's
/// CorruptInputError offset: `illegal base64 data at input byte N`.
pub fn base64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        let (next, n, bytes, err) = decode_quantum(src, si);
        out.extend_from_slice(&bytes[..n]);
        if let Some(e) = err {
            return Err(e);
        }
        si = next;
    }
    Ok(out)
}

fn decode_map(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Encoding.decodeQuantum, line for line: (next index, bytes written, the bytes, error).
fn decode_quantum(src: &[u8], mut si: usize) -> (usize, usize, [u8; 3], Option<usize>) {
    let mut dbuf = [0u8; 4];
    let mut dlen = 4;
    let mut err = None;
    let mut j = 0usize;
    while j < 4 {
        if si == src.len() {
            if j == 0 {
                return (si, 0, [0; 3], None);
            }
            // j == 1, or any short quantum with padding required.
            return (si, 0, [0; 3], Some(si - j));
        }
        let c = src[si];
        si += 1;
        if let Some(v) = decode_map(c) {
            dbuf[j] = v;
            j += 1;
            continue;
        }
        if c == b'\n' || c == b'\r' {
            continue;
        }
        if c != b'=' {
            return (si, 0, [0; 3], Some(si - 1));
        }
        // Padding: the end of the data.
        match j {
            0 | 1 => return (si, 0, [0; 3], Some(si - 1)),
            2 => {
                while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                    si += 1;
                }
                if si == src.len() {
                    return (si, 0, [0; 3], Some(src.len()));
                }
                if src[si] != b'=' {
                    return (si, 0, [0; 3], Some(si - 1));
                }
                si += 1;
            }
            _ => {}
        }
        while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
            si += 1;
        }
        if si < src.len() {
            err = Some(si);
        }
        dlen = j;
        break;
    }
    let val = (dbuf[0] as u32) << 18 | (dbuf[1] as u32) << 12 | (dbuf[2] as u32) << 6 | dbuf[3] as u32;
    let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
    (si, dlen - 1, bytes, err)
}

/// The text of Go's CorruptInputError.
pub fn base64_error(offset: usize) -> String {
    format!("illegal base64 data at input byte {offset}")
}

/// json.Unmarshal(data, &map[string]interface{}{}): the syntax is checked first (Go's scanner
/// and its messages), then the top-level value must be an object or null.
pub fn unmarshal_into_map(data: &[u8]) -> Result<(), String> {
    check_valid(data)?;
    let first = data.iter().find(|c| !is_space(**c)).copied().unwrap_or(b'n');
    let what = match first {
        b'{' | b'n' => return Ok(()),
        b'[' => "array",
        b'"' => "string",
        b't' | b'f' => "bool",
        _ => "number",
    };
    Err(format!("json: cannot unmarshal {what} into Go value of type map[string]interface {{}}"))
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// encoding/json's quoteChar: strconv.Quote of a byte taken as a rune (goquote.rs), between
/// single quotes, the two quotes themselves special.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'"' => "'\"'".into(),
        _ => {
            let quoted = crate::goquote::quote(&char::from(c).to_string());
            format!("'{}'", &quoted[1..quoted.len() - 1])
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, PartialEq)]
enum St {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    Literal(&'static [u8], usize, &'static str),
}

/// encoding/json's checkValid (the scanner), with its error messages.
fn check_valid(data: &[u8]) -> Result<(), String> {
    let mut stack: Vec<Parse> = vec![];
    let mut st = St::BeginValue;
    for &c in data {
        st = step(st, c, &mut stack)?;
    }
    if st == St::EndTop {
        return Ok(());
    }
    // scanner.eof: a final step with a space (it ends a number at the top level, or fails).
    match step(st, b' ', &mut stack)? {
        St::EndTop => Ok(()),
        _ => Err("unexpected end of JSON input".into()),
    }
}

fn error(c: u8, context: &str) -> Result<St, String> {
    Err(format!("invalid character {} {context}", quote_char(c)))
}

fn push(stack: &mut Vec<Parse>, p: Parse, next: St) -> Result<St, String> {
    stack.push(p);
    if stack.len() > 10000 {
        return Err("exceeded max depth".into());
    }
    Ok(next)
}

fn step(st: St, c: u8, stack: &mut Vec<Parse>) -> Result<St, String> {
    match st {
        St::BeginValueOrEmpty => {
            if is_space(c) {
                return Ok(st);
            }
            if c == b']' {
                return step(St::EndValue, c, stack);
            }
            step(St::BeginValue, c, stack)
        }
        St::BeginValue => match c {
            c if is_space(c) => Ok(st),
            b'{' => push(stack, Parse::ObjectKey, St::BeginStringOrEmpty),
            b'[' => push(stack, Parse::ArrayValue, St::BeginValueOrEmpty),
            b'"' => Ok(St::InString),
            b'-' => Ok(St::Neg),
            b'0' => Ok(St::Zero),
            b't' => Ok(St::Literal(b"true", 1, "in literal true")),
            b'f' => Ok(St::Literal(b"false", 1, "in literal false")),
            b'n' => Ok(St::Literal(b"null", 1, "in literal null")),
            b'1'..=b'9' => Ok(St::One),
            _ => error(c, "looking for beginning of value"),
        },
        St::BeginStringOrEmpty => {
            if is_space(c) {
                return Ok(st);
            }
            if c == b'}' {
                if let Some(top) = stack.last_mut() {
                    *top = Parse::ObjectValue;
                }
                return step(St::EndValue, c, stack);
            }
            step(St::BeginString, c, stack)
        }
        St::BeginString => match c {
            c if is_space(c) => Ok(st),
            b'"' => Ok(St::InString),
            _ => error(c, "looking for beginning of object key string"),
        },
        St::EndValue => {
            let Some(&top) = stack.last() else { return step(St::EndTop, c, stack) };
            if is_space(c) {
                return Ok(St::EndValue);
            }
            match (top, c) {
                (Parse::ObjectKey, b':') => {
                    *stack.last_mut().unwrap() = Parse::ObjectValue;
                    Ok(St::BeginValue)
                }
                (Parse::ObjectKey, _) => error(c, "after object key"),
                (Parse::ObjectValue, b',') => {
                    *stack.last_mut().unwrap() = Parse::ObjectKey;
                    Ok(St::BeginString)
                }
                (Parse::ObjectValue, b'}') | (Parse::ArrayValue, b']') => {
                    stack.pop();
                    Ok(if stack.is_empty() { St::EndTop } else { St::EndValue })
                }
                (Parse::ObjectValue, _) => error(c, "after object key:value pair"),
                (Parse::ArrayValue, b',') => Ok(St::BeginValue),
                (Parse::ArrayValue, _) => error(c, "after array element"),
            }
        }
        St::EndTop => {
            if is_space(c) {
                Ok(St::EndTop)
            } else {
                error(c, "after top-level value")
            }
        }
        St::InString => match c {
            b'"' => Ok(St::EndValue),
            b'\\' => Ok(St::InStringEsc),
            0..=0x1f => error(c, "in string literal"),
            _ => Ok(st),
        },
        St::InStringEsc => match c {
            b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => Ok(St::InString),
            b'u' => Ok(St::InStringEscU(0)),
            _ => error(c, "in string escape code"),
        },
        St::InStringEscU(n) => {
            if !c.is_ascii_hexdigit() {
                return error(c, "in \\u hexadecimal character escape");
            }
            Ok(if n == 3 { St::InString } else { St::InStringEscU(n + 1) })
        }
        St::Neg => match c {
            b'0' => Ok(St::Zero),
            b'1'..=b'9' => Ok(St::One),
            _ => error(c, "in numeric literal"),
        },
        St::One => {
            if c.is_ascii_digit() {
                return Ok(St::One);
            }
            step(St::Zero, c, stack)
        }
        St::Zero => match c {
            b'.' => Ok(St::Dot),
            b'e' | b'E' => Ok(St::E),
            _ => step(St::EndValue, c, stack),
        },
        St::Dot => {
            if c.is_ascii_digit() {
                Ok(St::Dot0)
            } else {
                error(c, "after decimal point in numeric literal")
            }
        }
        St::Dot0 => match c {
            b'0'..=b'9' => Ok(St::Dot0),
            b'e' | b'E' => Ok(St::E),
            _ => step(St::EndValue, c, stack),
        },
        St::E => {
            if c == b'+' || c == b'-' {
                return Ok(St::ESign);
            }
            step(St::ESign, c, stack)
        }
        St::ESign => {
            if c.is_ascii_digit() {
                Ok(St::E0)
            } else {
                error(c, "in exponent of numeric literal")
            }
        }
        St::E0 => {
            if c.is_ascii_digit() {
                Ok(St::E0)
            } else {
                step(St::EndValue, c, stack)
            }
        }
        St::Literal(word, i, context) => {
            if c != word[i] {
                return error(c, &format!("{context} (expecting {})", quote_char(word[i])));
            }
            Ok(if i + 1 == word.len() { St::EndValue } else { St::Literal(word, i + 1, context) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_is_quoted_as_encoding_json_quotes_it() {
        for (c, go) in [
            (b'a', "'a'"),
            (b'\'', r"'\''"),
            (b'"', "'\"'"),
            (b'\\', r"'\\'"),
            (0x00, r"'\x00'"),
            (0x07, r"'\a'"),
            (b'\n', r"'\n'"),
            (0x7f, r"'\x7f'"),
            (0x85, r"'\u0085'"),
            (0xa0, r"'\u00a0'"),
            (0xad, r"'\u00ad'"),
            (0xe9, "'é'"),
        ] {
            assert_eq!(quote_char(c), go, "{c:#x}");
        }
    }

    #[test]
    fn base64_as_go_decodes_it() {
        assert_eq!(base64_decode(b"aGk=").unwrap(), b"hi");
        assert_eq!(base64_decode(b"aG\nk=\r\n").unwrap(), b"hi");
        assert_eq!(base64_decode(b"").unwrap(), b"");
        // Non-zero trailing bits are fine for StdEncoding (not Strict).
        assert_eq!(base64_decode(b"aGl=").unwrap(), b"hi");
        assert_eq!(base64_decode(b"not base64!"), Err(3));
        assert_eq!(base64_decode(b"aGk"), Err(0));
        assert_eq!(base64_decode(b"aGVsbG8"), Err(4));
        assert_eq!(base64_decode(b"a==="), Err(1));
        assert_eq!(base64_decode(b"aG=="), Ok(b"h".to_vec()));
        assert_eq!(base64_decode(b"aG="), Err(3));
        assert_eq!(base64_decode(b"aGk=aGk="), Err(4));
    }

    #[test]
    fn json_errors_as_go_reports_them() {
        let e = |s: &str| unmarshal_into_map(s.as_bytes()).err();
        assert_eq!(e(r#"{"auths": {}}"#), None);
        assert_eq!(e(" null "), None);
        assert_eq!(e(""), Some("unexpected end of JSON input".into()));
        assert_eq!(e("{"), Some("unexpected end of JSON input".into()));
        assert_eq!(e("not json"), Some("invalid character 'o' in literal null (expecting 'u')".into()));
        assert_eq!(e("x"), Some("invalid character 'x' looking for beginning of value".into()));
        assert_eq!(e("{\"a\" 1}"), Some("invalid character '1' after object key".into()));
        assert_eq!(e("{\"a\":1 \"b\"}"), Some("invalid character '\"' after object key:value pair".into()));
        assert_eq!(e("{a}"), Some("invalid character 'a' looking for beginning of object key string".into()));
        assert_eq!(e("[1 2]"), Some("invalid character '2' after array element".into()));
        assert_eq!(e("{} x"), Some("invalid character 'x' after top-level value".into()));
        assert_eq!(e("01"), Some("invalid character '1' after top-level value".into()));
        assert_eq!(e("\"a\nb\""), Some("invalid character '\\n' in string literal".into()));
        assert_eq!(e("1."), Some("invalid character ' ' after decimal point in numeric literal".into()));
        assert_eq!(e("tr"), Some("invalid character ' ' in literal true (expecting 'u')".into()));
        assert_eq!(e("1.x"), Some("invalid character 'x' after decimal point in numeric literal".into()));
        assert_eq!(e("[]"), Some("json: cannot unmarshal array into Go value of type map[string]interface {}".into()));
        assert_eq!(e("12"), Some("json: cannot unmarshal number into Go value of type map[string]interface {}".into()));
        assert_eq!(e("\"s\""), Some("json: cannot unmarshal string into Go value of type map[string]interface {}".into()));
        assert_eq!(e("true"), Some("json: cannot unmarshal bool into Go value of type map[string]interface {}".into()));
    }
}
