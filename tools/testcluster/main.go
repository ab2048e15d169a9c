// testcluster: a real Kubernetes control plane built from Go modules, for testing and
// benchmarking tessera kube on one machine without containers. One binary, many commands:
//
//	testcluster up --dir D [--background]   etcd + kube-apiserver + controllers + KWOK
//	testcluster down --dir D [--purge]
//	testcluster bench --dir D --scheduler bare|tessera|kube-scheduler ...
//	testcluster kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kwok ARGS...
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	kubectl "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// kubeVersion is set by the build (-ldflags -X main.kubeVersion=...), as are
// k8s.io/component-base/version's variables that /version reports.
var kubeVersion = "unknown"

const usage = `usage: testcluster COMMAND [ARGS...]
  up --dir D [--background] [--gpu-nodes N] [--apply FILE]... [--port P] [--watch-cache=false]
     [--apiserver-arg=--flag=v]...
  down --dir D [--purge]
  bench --dir D --scheduler bare|tessera|kube-scheduler [--mode throughput|latency|gangs|restart] ...
  version
  kube-apiserver | kube-controller-manager | kube-scheduler | kubectl | kwok  ARGS...
`

func main() {
	name := filepath.Base(os.Args[0])
	if name == "testcluster" || name == "testcluster-warm" {
		if len(os.Args) < 2 {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	var err error
	switch name {
	case "up":
		err = runUp(os.Args[1:])
	case "down":
		err = runDown(os.Args[1:])
	case "bench":
		err = runBench(os.Args[1:])
	case "version", "--version":
		fmt.Println(kubeVersion)
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			util.CheckErr(err)
		}
	case "kwok":
		os.Exit(runKwok())
	default:
		fmt.Fprintf(os.Stderr, "testcluster: unknown command %q\n%s", name, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster %s: %v\n", name, err)
		os.Exit(1)
	}
}
