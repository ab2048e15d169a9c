module tessera.dev/tools/workloads/jobset

go 1.26.0

require sigs.k8s.io/jobset v0.10.1
