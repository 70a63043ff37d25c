# Sourced by the demos: a work directory, the local API server started with its kubeconfig
# exported, and everything started (append pids to `pids`) stopped and removed on exit.
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
