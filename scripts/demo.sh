#!/usr/bin/env bash
# The no-cluster demo: start the local API server, install the CRDs and the module ConfigMap
# (as `make deploy` does), run the operator watching that ConfigMap, apply the sample Hikawa
# unchanged, and print the song as it is sung. After SWAP_AFTER words it runs
# `make swap RULES=strict-ja`: the running operator checks the new module and the song goes on
# under the other rule set (ズン/ドコ, キ・ヨ・シ！), no restart. SWAP_AFTER=0 skips the swap.
set -euo pipefail
cd "$(dirname "$0")/.."

MODULE=${MODULE:-target/modules/zundoko-classic.wasm}
HIKAWA=${HIKAWA:-deploy/samples/hikawa-sample.yaml}
TIMEOUT=${TIMEOUT:-300}
SWAP_AFTER=${SWAP_AFTER:-4}
work=$(mktemp -d)
export KUBECONFIG=$work/kubeconfig
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

target/debug/zundoko-apiserver --port 0 --kubeconfig-out "$KUBECONFIG" > "$work/apiserver.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$KUBECONFIG" ] && break; sleep 0.1; done
[ -s "$KUBECONFIG" ] || { echo "the local API server did not start:" >&2; cat "$work/apiserver.log" >&2; exit 1; }
echo "== local API server: $(head -1 "$work/apiserver.log")"

kubectl apply --server-side -f deploy/crds/zundokokiyoshi.yaml
# The module ConfigMap, as `make deploy` creates it (deploy/module/ with the field manager of `make swap`).
kubectl create namespace zundoko-system
cp "$MODULE" deploy/module/rules.wasm
kubectl apply --server-side --field-manager=zundoko-deploy -k deploy/module/
target/debug/zundoko-operator run --module-configmap zundoko-system/zundoko-rules:rules.wasm \
  --operator-namespace zundoko-system --http-addr off > "$work/operator.log" 2>&1 &
pids+=($!)
echo "== operator running with $MODULE from ConfigMap zundoko-system/zundoko-rules (log: $work/operator.log)"

name=$(kubectl apply --server-side -f "$HIKAWA" -o jsonpath='{.metadata.name}')
echo "== applied $HIKAWA: hikawa/$name; the song:"
said=0
deadline=$((SECONDS + TIMEOUT))
while :; do
  words=$(kubectl get zundokos -l "zundokokiyoshi.kaitoy.github.com/hikawa=$name" \
            -o jsonpath='{range .items[*]}{.metadata.name} {.spec.say}{"\n"}{end}' | sort)
  count=$(printf '%s' "$words" | grep -c . || true)
  if [ "$count" -gt "$said" ]; then
    printf '%s\n' "$words" | tail -n +"$((said + 1))" | while read -r child word; do printf '  %-28s %s\n' "$child" "$word"; done
    said=$count
    if [ "$SWAP_AFTER" -gt 0 ] && [ "$said" -ge "$SWAP_AFTER" ] && [ -z "${swapped:-}" ]; then
      swapped=1
      echo "== make swap RULES=strict-ja: the running operator checks the new module and sings on with it"
      make --no-print-directory -s swap RULES=strict-ja > "$work/swap.log" 2>&1 || { cat "$work/swap.log" >&2; exit 1; }
    fi
  fi
  if kiyoshi=$(kubectl get kiyoshi "$name-kiyoshi" -o jsonpath='{.spec.say}' 2>/dev/null); then
    printf '  %-28s %s\n' "$name-kiyoshi" "$kiyoshi"
    break
  fi
  if ! kill -0 "${pids[1]}" 2>/dev/null; then echo "the operator exited:" >&2; cat "$work/operator.log" >&2; exit 1; fi
  [ $SECONDS -lt $deadline ] || { echo "no Kiyoshi after ${TIMEOUT}s" >&2; tail -20 "$work/operator.log" >&2; exit 1; }
  sleep 0.2
done
echo "== kubectl get hikawa"
sleep 0.5
kubectl get hikawa "$name"
echo "== the module swaps (Events from the operator)"
kubectl get events.events.k8s.io -A -o jsonpath='{range .items[*]}{.reason} {.note}{"\n"}{end}' 2>/dev/null | grep '^Module' || true
echo "== events on hikawa/$name (the song, once more)"
kubectl get events.events.k8s.io --field-selector "regarding.name=$name" -o jsonpath='{range .items[*]}{.reason} {.note}{"\n"}{end}' 2>/dev/null | tail -5 || true
