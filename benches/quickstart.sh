#!/usr/bin/env bash
# The quickstart applied → all eight web pods Running, timed with kubectl on
# each backend of `nodewright sandbox`: the API server double, and the real
# control plane of scripts/control-plane (--cluster). The sandbox runs with
# its default delays (launch 2 s, register 3 s); the time counts from
# `kubectl apply` to the last pod Running (polled every 100 ms), not the
# start of the sandbox or the control plane.
#
#   benches/quickstart.sh [RUNS]        (default 5; needs target/debug/nodewright)
#
# Prints one line per run and the median per backend.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
bin="${NODEWRIGHT_BIN:-target/debug/nodewright}"
[ -x "$bin" ] || { echo "build $bin first (cargo build)" >&2; exit 1; }

now() { date +%s.%N; }

# Applies the quickstart against $1 (a kubeconfig); prints seconds to Running.
measure() {
  local kubeconfig="$1" start end
  KUBECONFIG="$kubeconfig" kubectl create namespace shop >/dev/null
  start="$(now)"
  KUBECONFIG="$kubeconfig" kubectl apply -f examples/quickstart/nodepool.yaml \
    -f examples/quickstart/ec2nodeclass.yaml -f examples/quickstart/web.yaml >/dev/null
  until [ "$(KUBECONFIG="$kubeconfig" kubectl get pods -n shop -l app=web \
      -o 'jsonpath={range .items[*]}{.status.phase}{"\n"}{end}' 2>/dev/null | grep -c '^Running$')" = 8 ]; do
    sleep 0.1
  done
  end="$(now)"
  echo "$end - $start" | bc
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

work="$(mktemp -d)"
trap 'kill "${sandbox:-}" 2>/dev/null || true; scripts/control-plane stop "$work/cp" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

for backend in double kube-apiserver; do
  : >"$work/$backend.times"
  for ((i = 1; i <= runs; i++)); do
    if [ "$backend" = double ]; then
      kubeconfig="$work/sandbox.kubeconfig"
      "$bin" sandbox --kubeconfig "$kubeconfig" >"$work/out" 2>"$work/log" &
    else
      scripts/control-plane start "$work/cp" >/dev/null 2>&1
      kubeconfig="$work/cp/kubeconfig"
      "$bin" sandbox --cluster "$work/cp/nodewright.kubeconfig" >"$work/out" 2>"$work/log" &
    fi
    sandbox=$!
    until grep -q '^export KUBECONFIG=' "$work/out" 2>/dev/null; do sleep 0.1; done
    seconds="$(measure "$kubeconfig")"
    echo "$backend run $i: $seconds s"
    echo "$seconds" >>"$work/$backend.times"
    kill "$sandbox"; wait "$sandbox" || true
    if [ "$backend" = kube-apiserver ]; then
      scripts/control-plane stop "$work/cp"
      rm -rf "$work/cp"
    fi
  done
  echo "$backend median: $(median <"$work/$backend.times") s over $runs runs"
done
