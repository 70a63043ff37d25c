#!/usr/bin/env bash
# The no-cluster demo: start the local API server, install the CRDs and the module ConfigMap
# (as `make deploy` does), run the operator watching that ConfigMap, apply the sample Hikawa
# unchanged, and print the song as it is sung. After SWAP_AFTER words (default 1, so the swap
# can land before the earliest possible end of the song, Zun Zun Zun Zun Doko Kiyoshi) it runs
# `make swap RULES=strict-ja` in the background: the running operator checks the new module
# and the song goes on under the other rule set (ズン/ドコ, キ・ヨ・シ！), no restart. The demo
# says when the swap landed, or that the song ended first. SWAP_AFTER=0 skips the swap.
# Both modules are built by `make demo` before the song starts (`make guest`).
#
# RULES=python or RULES=js (`make demo RULES=python`): the song starts under the classic rules
# written in Python (JavaScript), served from a file (a CPython component is 18 MB, far more
# than a ConfigMap holds), and mid-song the file is replaced by the Rust classic rules: the
# operator checks the new module and swaps it in, no restart. The first run compiles the big
# module in the operator's compiler process (tens of seconds); the compiled code is kept in
# target/tmp/demo-cache, so later runs start at once.
set -euo pipefail
cd "$(dirname "$0")/.."

RULES=${RULES:-}
case "$RULES" in
  '') ;;
  python|py) MODULE=target/modules/zundoko-classic-py.wasm ;;
  js|javascript) MODULE=target/modules/zundoko-classic-js.wasm ;;
  *) echo "RULES=$RULES: the demo sings with RULES=python or RULES=js (or none: the Rust rules)" >&2; exit 1 ;;
esac
MODULE=${MODULE:-target/modules/zundoko-classic.wasm}
# What the swap mid-song brings in: Japanese rules, or (after Python/JavaScript) the Rust ones.
if [ -n "$RULES" ]; then SWAP_TO=zundoko-classic; else SWAP_TO=zundoko-strict-ja; fi
HIKAWA=${HIKAWA:-deploy/samples/hikawa-sample.yaml}
TIMEOUT=${TIMEOUT:-300}
SWAP_AFTER=${SWAP_AFTER:-1}
. scripts/lib/local-apiserver.sh

kubectl apply --server-side -f deploy/crds/zundokokiyoshi.yaml
kubectl create namespace zundoko-system
if [ -z "$RULES" ]; then
  # The module ConfigMap, as `make deploy` creates it (deploy/module/ with the field manager of `make swap`).
  cp "$MODULE" deploy/module/rules.wasm
  kubectl apply --server-side --field-manager=zundoko-deploy -k deploy/module/
  target/debug/zundoko-operator run --module-configmap zundoko-system/zundoko-rules:rules.wasm \
    --operator-namespace zundoko-system --http-addr off > "$work/operator.log" 2>&1 &
  pids+=($!)
  echo "== operator running with $MODULE from ConfigMap zundoko-system/zundoko-rules (log: $work/operator.log)"
else
  # A file the operator watches, as a mounted volume would be; replaced whole to swap.
  mkdir -p "$work/module" target/tmp/demo-cache
  cp "$MODULE" "$work/module/rules.wasm"
  target/debug/zundoko-operator run --module "$work/module/rules.wasm" --cache-dir target/tmp/demo-cache \
    --operator-namespace zundoko-system --http-addr off > "$work/operator.log" 2>&1 &
  pids+=($!)
  echo "== operator starting with $MODULE ($(stat -c %s "$MODULE") bytes) from a file (log: $work/operator.log)"
  echo "   (the first run compiles it in the operator's compiler process: tens of seconds; later runs load it from target/tmp/demo-cache)"
fi
swap() {
  if [ -z "$RULES" ]; then
    make --no-print-directory -s swap RULES=strict-ja
  else
    cp target/modules/zundoko-classic.wasm "$work/module/.rules.wasm.new"
    mv "$work/module/.rules.wasm.new" "$work/module/rules.wasm"
  fi
}

name=$(kubectl apply --server-side -f "$HIKAWA" -o jsonpath='{.metadata.name}')
echo "== applied $HIKAWA: hikawa/$name; the song:"
said=0
printed=()
swap_pid=
swap_started=
landed=
deadline=$((SECONDS + TIMEOUT))
module_now() { kubectl get hikawa "$name" -o jsonpath='{.status.module.name}' 2>/dev/null || true; }
while :; do
  # The Kiyoshi first, then the words: every word said before the Kiyoshi is in the list.
  kiyoshi=$(kubectl get kiyoshi "$name-kiyoshi" -o jsonpath='{.spec.say}' 2>/dev/null || true)
  words=$(kubectl get zundokos -l "zundokokiyoshi.kaitoy.github.com/hikawa=$name" \
            -o jsonpath='{range .items[*]}{.metadata.name} {.spec.say}{"\n"}{end}' | sort -V)
  count=$(printf '%s' "$words" | grep -c . || true)
  if [ "$count" -gt "$said" ]; then
    while read -r child word; do
      printf '  %-28s %s\n' "$child" "$word"; printed+=("$child $word")
    done < <(printf '%s\n' "$words" | tail -n +"$((said + 1))")
    said=$count
    if [ "$SWAP_AFTER" -gt 0 ] && [ "$said" -ge "$SWAP_AFTER" ] && [ -z "$swap_started" ]; then
      swap_started=$SECONDS
      if [ -z "$RULES" ]; then
        echo "== make swap RULES=strict-ja (in the background; the song goes on meanwhile)"
      else
        echo "== the module file replaced by the Rust classic rules (the song goes on meanwhile)"
      fi
      swap > "$work/swap.log" 2>&1 &
      swap_pid=$!
    fi
  fi
  if [ -n "$swap_pid" ] && ! kill -0 "$swap_pid" 2>/dev/null; then
    wait "$swap_pid" || { echo "make swap failed:" >&2; cat "$work/swap.log" >&2; exit 1; }
    swap_pid=
    echo "== the new module handed over in $((SECONDS - swap_started)) s: the operator checks it"
  fi
  if [ -n "$swap_started" ] && [ -z "$landed" ] && [ "$(module_now)" = "$SWAP_TO" ]; then
    landed=$said
    echo "== the swap landed: $SWAP_TO now decides ($said words printed so far)"
  fi
  if [ -n "$kiyoshi" ]; then
    printf '  %-28s %s\n' "$name-kiyoshi" "$kiyoshi"; printed+=("$name-kiyoshi $kiyoshi")
    break
  fi
  if ! kill -0 "${pids[1]}" 2>/dev/null; then echo "the operator exited:" >&2; cat "$work/operator.log" >&2; exit 1; fi
  [ $SECONDS -lt $deadline ] || { echo "no Kiyoshi after ${TIMEOUT}s" >&2; tail -20 "$work/operator.log" >&2; exit 1; }
  sleep 0.2
done
if [ -n "$swap_started" ] && [ -z "$landed" ]; then
  [ -z "$swap_pid" ] || wait "$swap_pid" || true
  echo "== the song ended before the swap landed (it was started after word $SWAP_AFTER,"
  echo "   $((SECONDS - swap_started)) s ago): the whole song was sung by $(kubectl get hikawa "$name" -o jsonpath='{.status.module.name}')"
fi
# The printed song must be exactly the children in the API server: nothing lost, nothing extra.
actual=$( { kubectl get zundokos -l "zundokokiyoshi.kaitoy.github.com/hikawa=$name" \
              -o jsonpath='{range .items[*]}{.metadata.name} {.spec.say}{"\n"}{end}' | sort -V
            printf '%s %s\n' "$name-kiyoshi" "$(kubectl get kiyoshi "$name-kiyoshi" -o jsonpath='{.spec.say}')"; } )
if [ "$(printf '%s\n' "${printed[@]}")" = "$actual" ]; then
  echo "== the printed song is exactly the ${#printed[@]} children in the API server"
else
  echo "== the printed song differs from the API server's children:" >&2
  diff <(printf '%s\n' "${printed[@]}") <(printf '%s\n' "$actual") >&2 || true
  exit 1
fi
echo "== kubectl get hikawa"
sleep 0.5
kubectl get hikawa "$name"
echo "== the module swaps (Events from the operator)"
kubectl get events.events.k8s.io -A -o jsonpath='{range .items[*]}{.reason} {.note}{"\n"}{end}' 2>/dev/null | grep '^Module' || true
echo "== events on hikawa/$name (the song, once more)"
kubectl get events.events.k8s.io --field-selector "regarding.name=$name" -o jsonpath='{range .items[*]}{.reason} {.note}{"\n"}{end}' 2>/dev/null | tail -5 || true
