#!/usr/bin/env bash
# Builds the helm CLI into $1 (default bin/helm) from the module go.mod pins (its `tool` line),
# stamped as Helm's own Makefile stamps a release: `helm version` says the module's version, and
# `helm lint` / `helm template` assume the Kubernetes minor of the client-go it was built with
# (Capabilities.KubeVersion) instead of the source's placeholder 1.20.
# Beside it, servicemonitors.monitoring.coreos.com.yaml: prometheus-operator's ServiceMonitor
# CRD at PROMETHEUS_OPERATOR (from its Go module), so that the chart test can have the real API
# server validate the chart's ServiceMonitor against the real schema.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/helm}"
PROMETHEUS_OPERATOR=v0.85.0
V="$(go list -m -f '{{.Version}}' helm.sh/helm/v3)"
K="$(go list -m -f '{{.Version}}' k8s.io/client-go)"   # v0.37.0 is Kubernetes 1.37
kminor="$(echo "$K" | cut -d. -f2)"
LD="-s -w -X helm.sh/helm/v3/internal/version.version=$V"
LD+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  LD+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
done
mkdir -p "$(dirname "$out")"
CGO_ENABLED=0 go build -trimpath -ldflags "$LD" -o "$out.tmp" helm.sh/helm/v3/cmd/helm
# Downloaded outside this module, so that its go.sum (part of the build's cache key) stays as is.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
po="$(cd "$tmp" && go mod download -json "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
crd="$(dirname "$out")/servicemonitors.monitoring.coreos.com.yaml"
cp "$po/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$crd.tmp"
chmod 644 "$crd.tmp"
mv "$crd.tmp" "$crd"
mv "$out.tmp" "$out"
