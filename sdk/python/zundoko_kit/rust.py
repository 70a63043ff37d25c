"""Rust's own text rules, so a Python rule set writes exactly what its Rust twin writes."""

import unicodedata

# char::is_whitespace: Unicode's White_Space property.
_WHITE_SPACE = frozenset(
    [chr(c) for c in range(0x09, 0x0E)]
    + ["\x20", "\x85", "\xa0", "\u1680"]
    + [chr(c) for c in range(0x2000, 0x200B)]
    + ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
)

# Grapheme_Extend = Mn + Me + Other_Grapheme_Extend (PropList.txt).
_OTHER_GRAPHEME_EXTEND = [
    (0x09BE, 0x09BE), (0x09D7, 0x09D7), (0x0B3E, 0x0B3E), (0x0B57, 0x0B57), (0x0BBE, 0x0BBE),
    (0x0BD7, 0x0BD7), (0x0CC2, 0x0CC2), (0x0CD5, 0x0CD6), (0x0D3E, 0x0D3E), (0x0D57, 0x0D57),
    (0x0DCF, 0x0DCF), (0x0DDF, 0x0DDF), (0x1B35, 0x1B35), (0x200C, 0x200C), (0x302E, 0x302F),
    (0xFF9E, 0xFF9F), (0x1133E, 0x1133E), (0x11357, 0x11357), (0x114B0, 0x114B0),
    (0x114BD, 0x114BD), (0x115AF, 0x115AF), (0x11930, 0x11930), (0x1D165, 0x1D165),
    (0x1D16E, 0x1D172), (0xE0020, 0xE007F),
]


def is_blank(s: str) -> bool:
    """`s.trim().is_empty()`."""
    return all(c in _WHITE_SPACE for c in s)


def _grapheme_extend(c: str) -> bool:
    if unicodedata.category(c) in ("Mn", "Me"):
        return True
    o = ord(c)
    return any(lo <= o <= hi for lo, hi in _OTHER_GRAPHEME_EXTEND)


_ESCAPES = {"\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"', "\0": "\\0"}


def debug_str(s: str) -> str:
    """`format!("{:?}", s)`: quoted, with Rust's escapes."""
    out = ['"']
    for c in s:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif _grapheme_extend(c) or not c.isprintable():
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)
