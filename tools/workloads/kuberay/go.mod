module tessera.dev/tools/workloads/kuberay

go 1.26.0

require github.com/ray-project/kuberay/ray-operator v1.5.0
