#!/usr/bin/env bash
# `make new-rules NAME=my-rules`: a new rule set crate in rules/NAME/, from tools/rules-template/.
# It is a workspace member at once (the workspace takes every rules/*), so
# `cargo test -p NAME` and `make rules NAME=NAME` work straight away.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
if ! [[ $name =~ ^[a-z][a-z0-9]*(-[a-z0-9]+)*$ ]] || [ ${#name} -gt 48 ]; then
  echo "usage: make new-rules NAME=my-rules (lowercase letters, digits and single dashes, starting with a letter, at most 48 characters; got '${name}')" >&2
  exit 1
fi
dir=rules/$name
if [ -e "$dir" ]; then echo "$dir already exists: pick another NAME" >&2; exit 1; fi
# The crate name must be new in the workspace too (zundoko-rules, zundoko-operator, ...).
if grep -qsx "name = \"$name\"" */Cargo.toml */*/Cargo.toml; then
  echo "a crate named $name already exists in this workspace: pick another NAME" >&2; exit 1
fi
crate=${name//-/_}
mkdir -p "$dir/src" "$dir/tests"
for f in src/lib.rs tests/song.rs; do
  sed -e "s/__NAME__/$name/g" -e "s/__CRATE__/$crate/g" "tools/rules-template/$f" > "$dir/$f"
done
sed -e "s/__NAME__/$name/g" tools/rules-template/Cargo.toml.in > "$dir/Cargo.toml"
cat <<MSG
created $dir/ (a crate of the workspace). Next:
  cargo test -p $name                 # the rules' native tests
  make rules NAME=$name               # build target/modules/$name.wasm (under 64 KiB)
  target/debug/zundoko-operator test --module target/modules/$name.wasm
  make simulate MODULE=target/modules/$name.wasm
  make swap RULES=$name               # into a running operator (make deploy / make demo)
MSG
