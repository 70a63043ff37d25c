#!/usr/bin/env bash
# scripts/workspace-members.sh add|remove NAME: list (or unlist) the Rust rule set rules/NAME in
# the workspace's `members` and `default-members` (Cargo.toml), under the lines
# `# rust rule sets (members)` and `# rust rule sets (default-members)`. The workspace lists
# its rule-set crates by name because rules/ also holds Python and JavaScript rule sets.
set -euo pipefail
cd "$(dirname "$0")/.."
action=${1:-}; name=${2:-}
[ -n "$name" ] || { echo "usage: $0 add|remove NAME" >&2; exit 1; }
entry="    \"rules/$name\","
case $action in
add)
  grep -qxF "$entry" Cargo.toml && exit 0
  for list in members default-members; do
    grep -qxF "    # rust rule sets ($list)" Cargo.toml \
      || { echo "Cargo.toml has no line '# rust rule sets ($list)' to add rules/$name under" >&2; exit 1; }
  done
  awk -v entry="$entry" '{ print } /^    # rust rule sets \((default-)?members\)$/ { print entry }' Cargo.toml > Cargo.toml.tmp
  mv Cargo.toml.tmp Cargo.toml ;;
remove)
  grep -vxF "$entry" Cargo.toml > Cargo.toml.tmp || true
  mv Cargo.toml.tmp Cargo.toml ;;
*) echo "usage: $0 add|remove NAME" >&2; exit 1 ;;
esac
