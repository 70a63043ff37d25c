#!/usr/bin/env bash
# The rule-set demo, no cluster needed: the local API server, the operator, two ZundokoRules
# serving at once (classic, and the stricter rules in Japanese), Hikawas choosing between them
# with spec.rules, then a staged rollout of a candidate to half of the classic Hikawas. The
# candidate (a test fixture) passes every check a swap makes but traps from the second word on:
# the operator rolls it back by itself, at once for every Hikawa, and every song still ends
# valid. At the end the demo checks that (exit 1 otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."

TIMEOUT=${TIMEOUT:-300}
INTERVAL=${INTERVAL:-400}
NS=zundoko-system
. scripts/lib/local-apiserver.sh
deadline=$((SECONDS + TIMEOUT))
fail() { echo "== FAILED: $*" >&2; tail -20 "$work/operator.log" >&2 || true; exit 1; }
within() { [ $SECONDS -lt $deadline ] || fail "$1 after ${TIMEOUT}s"; }
phase() { kubectl get zr "$1" -o jsonpath='{.status.phase}' 2>/dev/null || true; }
kubectl apply --server-side -f deploy/crds/zundokokiyoshi.yaml > /dev/null
kubectl create namespace "$NS" > /dev/null

echo "== three rules modules, each in a ConfigMap of $NS"
kubectl -n "$NS" create configmap rules-classic --from-file=rules.wasm=target/modules/zundoko-classic.wasm
kubectl -n "$NS" create configmap rules-strict-ja --from-file=rules.wasm=target/modules/zundoko-strict-ja.wasm
kubectl -n "$NS" create configmap rules-flaky --from-file=rules.wasm=target/fixtures/zundoko-flaky.wasm
target/debug/zundoko-operator run --module target/modules/zundoko-classic.wasm \
  --operator-namespace "$NS" --http-addr off > "$work/operator.log" 2>&1 &
pids+=($!)
echo "== operator running (rules read from ConfigMaps in $NS; log: $work/operator.log)"

echo "== two rule sets at once"
kubectl apply -f - <<EOF
apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta1
kind: ZundokoRules
metadata: {name: classic}
spec: {source: {configMap: {namespace: $NS, name: rules-classic}}}
---
apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta1
kind: ZundokoRules
metadata: {name: japanese}
spec: {source: {configMap: {namespace: $NS, name: rules-strict-ja}}}
EOF
until [ "$(phase classic)" = Active ] && [ "$(phase japanese)" = Active ]; do within "rule sets not Active"; sleep 0.2; done
kubectl get zr

classic=(c-1 c-2 c-3 c-4 c-5 c-6 c-7 c-8)
japanese=(j-1 j-2 j-3)
echo "== ${#classic[@]} Hikawas on rules classic, ${#japanese[@]} on japanese, a word every $INTERVAL ms"
{
  for h in "${classic[@]}"; do
    printf 'apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta1\nkind: Hikawa\nmetadata: {name: %s, namespace: default}\nspec: {intervalMillis: %s, rules: classic, params: {flaky: "yes"}}\n---\n' "$h" "$INTERVAL"
  done
  for h in "${japanese[@]}"; do
    printf 'apiVersion: zundokokiyoshi.kaitoy.github.com/v1beta1\nkind: Hikawa\nmetadata: {name: %s, namespace: default}\nspec: {intervalMillis: %s, rules: japanese}\n---\n' "$h" "$INTERVAL"
  done
} | kubectl apply -f - > /dev/null
until [ "$(kubectl get hikawa c-1 -o jsonpath='{.status.numZundokosSaid}' 2>/dev/null || echo 0)" -ge 1 ]; do within "no word"; sleep 0.2; done
kubectl get hikawa -o custom-columns='NAME:.metadata.name,RULES:.spec.rules,SAID:.status.numZundokosSaid,MODULE:.status.module.name'

echo "== a staged rollout on classic: candidate rules-flaky for 50 % of its Hikawas (by uid)"
kubectl patch zr classic --type merge -p "{\"spec\":{\"candidate\":{\"source\":{\"configMap\":{\"namespace\":\"$NS\",\"name\":\"rules-flaky\"}},\"rollout\":{\"percent\":50,\"promoteAfterSeconds\":120,\"maxFailurePercent\":0}}}}"
until [ "$(phase classic)" = RollingOut ] || [ "$(phase classic)" = RolledBack ]; do within "no rollout"; sleep 0.1; done
share=$(kubectl get zr classic -o jsonpath='{.status.candidateHikawas}')
if [ "$(phase classic)" = RollingOut ] && [ "${share:-0}" = 0 ]; then
  echo "== (no classic Hikawa's uid falls in the 50 %: raising the candidate's share to 100 %)"
  kubectl patch zr classic --type merge -p '{"spec":{"candidate":{"rollout":{"percent":100}}}}'
fi
kubectl get zr
echo "== the candidate fails on its Hikawas; the operator rolls it back by itself"
until [ "$(phase classic)" = RolledBack ]; do within "no rollback"; sleep 0.1; done
kubectl get zr
kubectl get zr classic -o jsonpath='{.status.message}{"\n"}'

echo "== every song goes on to its Kiyoshi"
for h in "${classic[@]}" "${japanese[@]}"; do
  until [ "$(kubectl get hikawa "$h" -o jsonpath='{.status.kiyoshied}')" = true ]; do within "$h never kiyoshied"; sleep 0.3; done
done
status=0
for h in "${classic[@]}" "${japanese[@]}"; do
  words=$(kubectl get zundokos -l "zundokokiyoshi.kaitoy.github.com/hikawa=$h" \
            -o jsonpath='{range .items[*]}{.metadata.name} {.spec.say}{"\n"}{end}' | sort -V)
  kiyoshi=$(kubectl get kiyoshi "$h-kiyoshi" -o jsonpath='{.spec.say}')
  count=$(printf '%s\n' "$words" | grep -c .)
  said=$(kubectl get hikawa "$h" -o jsonpath='{.status.numZundokosSaid}')
  expected=$(seq -f "$h-zundoko-%03g" 1 "$count")
  printf '  %-4s %-9s %s %s\n' "$h" "$(kubectl get hikawa "$h" -o jsonpath='{.spec.rules}')" "$(printf '%s\n' "$words" | awk '{printf "%s ", $2}')" "$kiyoshi"
  if [ "$(printf '%s\n' "$words" | awk '{print $1}')" != "$expected" ] || [ "$count" != "$said" ] || [ -z "$kiyoshi" ]; then
    echo "  $h: the song is not whole (indexes, count $count against status $said, kiyoshi '$kiyoshi')" >&2; status=1
  fi
done
echo "== events on the rule sets"
kubectl get events.events.k8s.io -n default -o jsonpath='{range .items[?(@.regarding.kind=="ZundokoRules")]}{.regarding.name} {.type} {.reason}: {.note}{"\n"}{end}'
echo "== kubectl get zr"
kubectl get zr
[ "$(phase classic)" = RolledBack ] && [ "$(phase japanese)" = Active ] || { echo "unexpected phases" >&2; status=1; }
[ $status -eq 0 ] && echo "== every song is whole; the candidate was rolled back and the stable rules finished them" || exit 1
