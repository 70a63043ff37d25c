"""Child names, as the host expects them (sdk/rust/src/naming.rs)."""


def zundoko_name(hikawa: str, index: int) -> str:
    """`<hikawa>-zundoko-007`: the index, zero-padded to at least three digits."""
    return f"{hikawa}-zundoko-{index:03d}"


def kiyoshi_name(hikawa: str) -> str:
    """`<hikawa>-kiyoshi`."""
    return f"{hikawa}-kiyoshi"
