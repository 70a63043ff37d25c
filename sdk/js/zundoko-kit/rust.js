// Rust's own text rules, so a JavaScript rule set writes exactly what its Rust twin writes.

import { ESCAPED_RANGES } from './unicode-escaped.js';

// char::is_whitespace: Unicode's White_Space property (String.prototype.trim differs: it
// trims U+FEFF and keeps U+0085).
const WHITE_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;

/** `s.trim().is_empty()`. */
export const isBlank = (s) => WHITE_SPACE.test(s);

const ESCAPES = { '\t': '\\t', '\r': '\\r', '\n': '\\n', '\\': '\\\\', '"': '\\"', '\0': '\\0' };

/** Does Rust escape this code point as \u{..}? Grapheme_Extend, and what is not printable (the
 * Other and Separator categories but the ASCII space). */
function unicodeEscaped(c) {
  let lo = 0;
  let hi = ESCAPED_RANGES.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (c < ESCAPED_RANGES[2 * mid]) hi = mid - 1;
    else if (c > ESCAPED_RANGES[2 * mid + 1]) lo = mid + 1;
    else return true;
  }
  return false;
}

/** `format!("{:?}", s)`: quoted, with Rust's escapes. */
export function debugStr(s) {
  let out = '"';
  for (const c of s) {
    if (Object.hasOwn(ESCAPES, c)) out += ESCAPES[c];
    else if (unicodeEscaped(c.codePointAt(0))) out += `\\u{${c.codePointAt(0).toString(16)}}`;
    else out += c;
  }
  return out + '"';
}
