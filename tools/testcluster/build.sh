#!/usr/bin/env bash
# Builds testcluster into $1 (default bin/testcluster), with the Kubernetes version that
# go.mod pins stamped where /version and `kubectl version` read it.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-bin/testcluster}"
V="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="$(echo "$V" | cut -d. -f2)"
LD="-s -w -X main.kubeVersion=$V"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LD+=" -X $pkg.gitVersion=$V -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
go build -trimpath -ldflags "$LD" -o "$out.tmp" .
mv "$out.tmp" "$out"
