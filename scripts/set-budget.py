#!/usr/bin/env python3
"""Write a module's budget into it: a top-level custom section `zundoko:budget` holding JSON
such as {"memoryMiB": 96, "fuel": 400000000, "moduleMiB": 24}. The operator grants it up to its ceilings
(--max-memory-mib, --max-fuel) and refuses a module asking for more (SPEC 3b).

usage: scripts/set-budget.py MODULE.wasm [--memory-mib N] [--fuel N] [--module-mib N]
An existing budget section is replaced; with neither option the section is removed."""
import argparse, json, sys

SECTION = b"zundoko:budget"


def leb(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def read_leb(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module")
    parser.add_argument("--memory-mib", type=int)
    parser.add_argument("--fuel", type=int)
    parser.add_argument("--module-mib", type=int)
    args = parser.parse_args()
    data = open(args.module, "rb").read()
    if data[:4] != b"\0asm" or data[4:8] == b"\x01\0\0\0":
        sys.exit(f"{args.module}: not a WebAssembly component")
    # Keep every top-level section but an old budget.
    kept, at = bytearray(data[:8]), 8
    while at < len(data):
        start, section_id = at, data[at]
        size, body = read_leb(data, at + 1)
        at = body + size
        if section_id == 0:
            name_len, name_at = read_leb(data, body)
            if data[name_at:name_at + name_len] == SECTION:
                continue
        kept += data[start:at]
    budget = {k: v for k, v in (("memoryMiB", args.memory_mib), ("fuel", args.fuel), ("moduleMiB", args.module_mib)) if v is not None}
    if budget:
        content = leb(len(SECTION)) + SECTION + json.dumps(budget, separators=(",", ":")).encode()
        kept += b"\0" + leb(len(content)) + content
    with open(args.module, "wb") as f:
        f.write(kept)
    print(f"{args.module}: budget {budget or 'none (the operator defaults)'}")


if __name__ == "__main__":
    main()
