#!/usr/bin/env bash
# `make new-rules NAME=my-rules [LANG=rust|python|js]`: a new rule set in rules/NAME/.
#   rust (the default): a crate from sdk/rust/template/, added to the workspace's members in
#     Cargo.toml, so `cargo test -p NAME` and `make rules NAME=NAME` work straight away.
#   python: pyproject.toml, rules.py, app.py and tests/ (pytest) from sdk/python/template/.
#   js: package.json, rules.js, app.js and test/ (node --test) from sdk/js/template/.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-}
lang=${2:-rust}
case $lang in
  rust | python | js) ;;
  py) lang=python ;;
  javascript) lang=js ;;
  *) echo "usage: make new-rules NAME=my-rules [LANG=rust|python|js] (got LANG=$lang)" >&2; exit 1 ;;
esac
if ! [[ $name =~ ^[a-z][a-z0-9]*(-[a-z0-9]+)*$ ]] || [ ${#name} -gt 48 ]; then
  echo "usage: make new-rules NAME=my-rules [LANG=rust|python|js] (lowercase letters, digits and single dashes, starting with a letter, at most 48 characters; got '${name}')" >&2
  exit 1
fi
dir=rules/$name
if [ -e "$dir" ]; then echo "$dir already exists: pick another NAME" >&2; exit 1; fi
# The name must be new in the workspace too (zundoko-rules, zundoko-operator, ...): it is the
# crate's name, and for every language the module's name.
if grep -qsx "name = \"$name\"" */Cargo.toml */*/Cargo.toml */*/pyproject.toml \
  || grep -qs "\"name\": \"$name\"" rules/*/package.json; then
  echo "a crate or rule set named $name already exists in this workspace: pick another NAME" >&2; exit 1
fi
ident=${name//-/_}

case $lang in
rust)
  mkdir -p "$dir/src" "$dir/tests"
  for f in src/lib.rs tests/song.rs; do
    sed -e "s/__NAME__/$name/g" -e "s/__CRATE__/$ident/g" "sdk/rust/template/$f" > "$dir/$f"
  done
  sed -e "s/__NAME__/$name/g" sdk/rust/template/Cargo.toml.in > "$dir/Cargo.toml"
  scripts/workspace-members.sh add "$name"
  cat <<MSG
created $dir/ (a crate of the workspace, listed in Cargo.toml). Next:
  cargo test -p $name                 # the rules' native tests
  make rules NAME=$name               # build target/modules/$name.wasm (under 64 KiB)
  target/debug/zundoko-operator test --module target/modules/$name.wasm
  make simulate MODULE=target/modules/$name.wasm
  make swap RULES=$name               # into a running operator (make deploy / make demo)
  make remove-rules NAME=$name        # to remove it
MSG
  ;;
python | js)
  # The interpreted languages: the same scaffold from each kit's template/.
  if [ "$lang" = python ]; then
    tests=tests files="pyproject.toml rules.py app.py tests/test_song.py"
    what="Python: rules.py, app.py, pyproject.toml, tests/" runner=pytest built="componentize-py, about 18 MB"
  else
    tests=test files="package.json rules.js app.js test/song.test.js"
    what="JavaScript: rules.js, app.js, package.json, test/" runner="node --test" built="componentize-js, about 12 MB"
  fi
  mkdir -p "$dir/$tests"
  for f in $files; do
    sed -e "s/__NAME__/$name/g" "sdk/$lang/template/$f" > "$dir/$f"
  done
  cat <<MSG
created $dir/ ($what). Next:
  make test-rules NAME=$name          # the rules' native tests ($runner; installs the pinned kit once)
  make rules NAME=$name               # build target/modules/$name.wasm ($built)
  target/debug/zundoko-operator test --module target/modules/$name.wasm
  make simulate MODULE=target/modules/$name.wasm
  make push MODULE=target/modules/$name.wasm REF=REGISTRY/REPO:TAG   # too big for a ConfigMap (1 MiB): a registry, then a ZundokoRules
  make remove-rules NAME=$name        # to remove it
MSG
  ;;
esac
