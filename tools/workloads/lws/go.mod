module tessera.dev/tools/workloads/lws

go 1.26.0

require sigs.k8s.io/lws v0.7.0
