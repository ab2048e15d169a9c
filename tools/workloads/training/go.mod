module tessera.dev/tools/workloads/training

go 1.26.0

require github.com/kubeflow/training-operator v1.8.1
