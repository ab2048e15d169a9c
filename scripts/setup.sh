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
# Tools built from Go modules, each cached under ~/.cache/tessera (or $TESSERA_CACHE) in a
# folder keyed by the content of its inputs, so that it is built once per change:
#   cached_build NAME DIR OUT MARK INPUT...   runs DIR/build.sh CACHE/OUT unless CACHE/MARK
# exists (INPUTs: paths or globs relative to DIR), and sets $cache to CACHE.
if ! command -v go >/dev/null; then
  echo "setup.sh: Go 1.26 or newer is needed to build tools/ (the Go module proxy must be reachable)" >&2
  exit 1
fi
cached_build() {
  local name=$1 dir=$2 out=$3 mark=$4 key start
  shift 4
  # shellcheck disable=SC2048,SC2086 # the inputs are globs, expanded in DIR
  key="$(cd "$dir" && cat $* | sha256sum | cut -c1-16)"
  cache="${TESSERA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera}/$name-$key"
  if [ ! -e "$cache/$mark" ]; then
    echo "setup.sh: building $name from $dir into $cache" >&2
    mkdir -p "$cache"
    start=$(date +%s)
    "$dir/build.sh" "$cache/$out"
    echo "setup.sh: $name built in $(( $(date +%s) - start )) s" >&2
  fi
}
tools="$(cd "$(dirname "$0")/../tools" && pwd)"
# A real Kubernetes control plane for the kube tests and benchmarks (tools/testcluster: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and KWOK, built from Go
# modules into one binary; about 7 minutes on 2 cores the first time).
cached_build testcluster "$tools/testcluster" testcluster testcluster \
  go.mod go.sum build.sh './*.go' 'stages/*'
mkdir -p "$tools/testcluster/bin"
ln -sfn "$cache/testcluster" "$tools/testcluster/bin/testcluster"
# The helm CLI for the chart's tests (deploy/helm/tessera; tests/kube/kube_real_helm_test.cc),
# with prometheus-operator's ServiceMonitor CRD beside it (about 3 minutes).
cached_build helm "$tools/helm" helm servicemonitors.monitoring.coreos.com.yaml \
  go.mod go.sum build.sh
mkdir -p "$tools/helm/bin"
ln -sfn "$cache/helm" "$tools/helm/bin/helm"
ln -sfn "$cache/servicemonitors.monitoring.coreos.com.yaml" \
  "$tools/helm/bin/servicemonitors.monitoring.coreos.com.yaml"
# The workload controllers the real-server tests run beside tessera kube (JobSet,
# LeaderWorkerSet, Kubeflow training-operator, KubeRay; testcluster up --workloads), each
# from its own Go module pinned in tools/workloads/ (about 8 minutes).
cached_build workloads "$tools/workloads" . kuberay/controller \
  build.sh './*/go.mod' './*/go.sum'
ln -sfn "$cache" "$tools/workloads/bin"
