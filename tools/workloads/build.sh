#!/usr/bin/env bash
# Builds the workload controllers users run beside a scheduler, each from its own Go module
# (its own pinned Kubernetes libraries), into $1 (default bin/) as testcluster's --workloads
# reads them: $1/NAME/controller, $1/NAME/crds/*.yaml and $1/NAME/webhooks.yaml (the project's
# CRDs and webhook configurations, from the module's own source).
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# NAME MODULE PACKAGE CRD_FILES (a glob in the module) WEBHOOKS_FILE ("" for none)
build() {
  local name=$1 mod=$2 pkg=$3 crds=$4 hooks=$5 src
  mkdir -p "$out/$name/crds"
  (cd "$name" && go build -trimpath -ldflags "-s -w" -o "$out/$name/controller.tmp" "$pkg")
  src="$(cd "$name" && go list -m -f '{{.Dir}}' "$mod")"
  # shellcheck disable=SC2086 # the glob is meant to expand
  cp $src/$crds "$out/$name/crds/"
  if [ -n "$hooks" ]; then cp "$src/$hooks" "$out/$name/webhooks.yaml"; fi
  mv "$out/$name/controller.tmp" "$out/$name/controller"
}

build jobset sigs.k8s.io/jobset sigs.k8s.io/jobset \
  'config/components/crd/bases/*.yaml' config/components/webhook/manifests.yaml
build lws sigs.k8s.io/lws sigs.k8s.io/lws/cmd 'config/crd/bases/*.yaml' config/webhook/manifests.yaml
build training github.com/kubeflow/training-operator \
  github.com/kubeflow/training-operator/cmd/training-operator.v1 \
  'manifests/base/crds/kubeflow.org_pytorchjobs.yaml' ""
build kuberay github.com/ray-project/kuberay/ray-operator github.com/ray-project/kuberay/ray-operator \
  'config/crd/bases/*.yaml' ""
