package main

// KWOK, run from this binary: fake kubelets for the nodes annotated kwok.x-k8s.io/node=fake.
// Stages: KWOK's own for node start-up, heartbeat with leases and pod ready, and ours for pod
// completion and deletion (stages/).

import (
	_ "embed"
	"os"
	"strings"

	"github.com/spf13/pflag"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

var (
	//go:embed stages/pod-complete.yaml
	podCompleteStage string
	//go:embed stages/pod-delete.yaml
	podDeleteStage string
)

func writeKwokConfig(path string) error {
	docs := []string{nodefast.DefaultNodeInit, nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady, podCompleteStage, podDeleteStage}
	for i := range docs {
		docs[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(docs[i]), "---"))
	}
	return os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}

// runKwok is KWOK's own main (cmd/kwok), with os.Args already shifted to kwok's.
func runKwok() int {
	// Kubernetes' packages register --version on the global flag set, which cobra merges
	// into KWOK's command, where it clashes with cobra's own --version.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}
	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err := config.InitFlags(ctx, flagset)
	if err != nil {
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}
