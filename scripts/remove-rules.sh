#!/usr/bin/env bash
# `make remove-rules NAME=my-rules`: delete rules/NAME/ (any language) and its built module, and
# for a Rust rule set its entries in the workspace's members (Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
if ! [[ $name =~ ^[a-z][a-z0-9]*(-[a-z0-9]+)*$ ]]; then
  echo "usage: make remove-rules NAME=<a rule set in rules/>" >&2; exit 1
fi
[ -d "rules/$name" ] || grep -qxF "    \"rules/$name\"," Cargo.toml || { echo "no rule set rules/$name/" >&2; exit 1; }
rust=""; [ -f "rules/$name/Cargo.toml" ] && rust=1
scripts/workspace-members.sh remove "$name"
rm -rf "rules/$name" "target/modules/$name.wasm"
# Cargo.lock forgets the crate at once (cargo would at its next build).
[ -n "$rust" ] && { cargo metadata --format-version 1 --offline > /dev/null 2>&1 || true; }
echo "removed rules/$name/"
