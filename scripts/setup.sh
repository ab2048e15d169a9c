#!/usr/bin/env bash
# Installs every build and test dependency from Debian's packages (idempotent).
set -euo pipefail
PKGS=(g++ cmake ninja-build pkg-config python3
      libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libfmt-dev
      libsqlite3-dev libssl-dev libcpp-httplib-dev libsimdjson-dev libglpk-dev
      clang libclang-rt-14-dev openssl
      python3-pytest python3-venv python3-pip python3-setuptools python3-wheel
      nodejs chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# The chart library built into the binary and the browser driver the tests use, at the
# versions web/package-lock.json pins (Chromium itself is Debian's, above).
web="$(dirname "$0")/../web"
if [ ! -d "$web/node_modules/chart.js" ] || [ ! -d "$web/node_modules/playwright-core" ] ||
   [ "$web/package-lock.json" -nt "$web/node_modules/.package-lock.json" ]; then
  npm ci --prefix "$web" --no-audit --no-fund
fi
# A real Kubernetes control plane for the kube tests and benchmarks (tools/testcluster: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and KWOK, built from Go
# modules into one binary). The first build takes about 7 minutes on 2 cores; it is cached
# under ~/.cache/tessera (or $TESSERA_CACHE), keyed by the module's sources and go.sum.
tc="$(cd "$(dirname "$0")/../tools/testcluster" && pwd)"
if ! command -v go >/dev/null; then
  echo "setup.sh: Go 1.26 or newer is needed to build $tc (the Go module proxy must be reachable)" >&2
  exit 1
fi
key="$(cd "$tc" && cat go.mod go.sum build.sh ./*.go stages/* | sha256sum | cut -c1-16)"
cache="${TESSERA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera}/testcluster-$key"
if [ ! -x "$cache/testcluster" ]; then
  echo "setup.sh: building tools/testcluster (Kubernetes $(cd "$tc" && go list -m -f '{{.Version}}' k8s.io/kubernetes)) into $cache" >&2
  mkdir -p "$cache"
  start=$(date +%s)
  "$tc/build.sh" "$cache/testcluster"
  echo "setup.sh: testcluster built in $(( $(date +%s) - start )) s" >&2
fi
mkdir -p "$tc/bin"
ln -sfn "$cache/testcluster" "$tc/bin/testcluster"
# The helm CLI for the chart's tests (deploy/helm/tessera; tests/kube/kube_real_helm_test.cc),
# built from the Go module tools/helm/go.mod pins (about 3 minutes on 2 cores the first time),
# with prometheus-operator's ServiceMonitor CRD beside it; cached like testcluster, keyed by the
# module's go.mod, go.sum and build.sh.
hm="$(cd "$(dirname "$0")/../tools/helm" && pwd)"
key="$(cd "$hm" && cat go.mod go.sum build.sh | sha256sum | cut -c1-16)"
cache="${TESSERA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera}/helm-$key"
if [ ! -x "$cache/helm" ] || [ ! -f "$cache/servicemonitors.monitoring.coreos.com.yaml" ]; then
  echo "setup.sh: building tools/helm (helm $(cd "$hm" && go list -m -f '{{.Version}}' helm.sh/helm/v3)) into $cache" >&2
  mkdir -p "$cache"
  start=$(date +%s)
  "$hm/build.sh" "$cache/helm"
  echo "setup.sh: helm built in $(( $(date +%s) - start )) s" >&2
fi
mkdir -p "$hm/bin"
ln -sfn "$cache/helm" "$hm/bin/helm"
ln -sfn "$cache/servicemonitors.monitoring.coreos.com.yaml" \
  "$hm/bin/servicemonitors.monitoring.coreos.com.yaml"
# The workload controllers the real-server tests run beside tessera kube (JobSet,
# LeaderWorkerSet, Kubeflow training-operator, KubeRay; testcluster up --workloads), each
# built from its own Go module pinned in tools/workloads/ (about 8 minutes on 2 cores the
# first time); cached like testcluster, keyed by those modules and build.sh.
wl="$(cd "$(dirname "$0")/../tools/workloads" && pwd)"
key="$(cd "$wl" && cat build.sh ./*/go.mod ./*/go.sum | sha256sum | cut -c1-16)"
cache="${TESSERA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera}/workloads-$key"
if [ ! -x "$cache/kuberay/controller" ]; then
  echo "setup.sh: building the workload controllers in tools/workloads into $cache" >&2
  start=$(date +%s)
  "$wl/build.sh" "$cache"
  echo "setup.sh: workload controllers built in $(( $(date +%s) - start )) s" >&2
fi
ln -sfn "$cache" "$wl/bin"
