package main

// `testcluster up`: embedded etcd in this process, kube-apiserver, kube-controller-manager
// (only the controllers a test needs) and KWOK as child processes of this same binary. Every
// child that exits while the cluster is up is started again on the same ports and etcd, so
// a test can SIGKILL the API server (its pid is in DIR/pids/) and see it come back.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type upOptions struct {
	dir          string
	port         int
	etcdPort     int
	watchCache   bool
	noFsync      bool
	kwok         bool
	controllers  string
	restartDelay time.Duration
	background   bool
	audit        bool
	apiserverArg stringList
	kcmArg       stringList
	kwokArg      stringList
	gpuNodes     int
	apply        stringList
	workloads    string
}

// clusterInfo is DIR/cluster.json: what a test or a user needs to reach the cluster.
type clusterInfo struct {
	Server     string `json:"server"`
	Etcd       string `json:"etcd"`
	Kubeconfig string `json:"kubeconfig"`
	AuditLog   string `json:"audit_log,omitempty"`
	Pid        int    `json:"pid"`
	Version    string `json:"version"`
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func runUp(args []string) error {
	var o upOptions
	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "directory for the cluster's state, credentials and logs (required)")
	fs.IntVar(&o.port, "port", 0, "kube-apiserver's port on 127.0.0.1 (0: a free one)")
	fs.IntVar(&o.etcdPort, "etcd-port", 0, "etcd's client port on 127.0.0.1 (0: a free one)")
	fs.BoolVar(&o.watchCache, "watch-cache", true, "kube-apiserver's watch cache (off: watches go to etcd, and a compacted revision answers 410 Gone)")
	fs.BoolVar(&o.noFsync, "etcd-unsafe-no-fsync", false, "etcd without fsync (faster; loses data on a host crash)")
	fs.BoolVar(&o.kwok, "kwok", true, "run KWOK for nodes annotated kwok.x-k8s.io/node=fake")
	fs.StringVar(&o.controllers, "controllers", "namespace-controller,serviceaccount-controller,garbage-collector-controller,disruption-controller,node-lifecycle-controller,clusterrole-aggregation-controller,job-controller,replicaset-controller,deployment-controller,statefulset-controller", "kube-controller-manager's controllers (empty: none)")
	fs.DurationVar(&o.restartDelay, "restart-delay", 500*time.Millisecond, "wait before starting a component that exited")
	fs.BoolVar(&o.background, "background", false, "start in the background, print READY when the cluster answers, and return")
	fs.BoolVar(&o.audit, "audit", true, "write an audit log of every write request (DIR/audit.log)")
	fs.Var(&o.apiserverArg, "apiserver-arg", "an extra kube-apiserver flag, as --name=value (repeatable)")
	fs.Var(&o.kcmArg, "controller-manager-arg", "an extra kube-controller-manager flag, as --name=value (repeatable)")
	fs.Var(&o.kwokArg, "kwok-arg", "an extra KWOK flag, as --name=value (repeatable; a later one wins)")
	fs.IntVar(&o.gpuNodes, "gpu-nodes", 0, "create this many KWOK nodes of 8 GPUs (node-00000, ...) and wait until they are Ready")
	fs.StringVar(&o.workloads, "workloads", "", "start the workload controllers built into this directory (tools/workloads/build.sh): JobSet, LeaderWorkerSet, training-operator, KubeRay")
	fs.Var(&o.apply, "apply", "a manifest (file or directory) to kubectl apply once the server answers (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.dir == "" {
		return errors.New("up: --dir is required")
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	o.dir = dir
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "pids"), 0o755); err != nil {
		return err
	}
	if o.background {
		return startBackground(o.dir, args)
	}
	return up(o)
}

// startBackground runs `up` again without --background in a session of its own, waits for
// its READY, and returns.
func startBackground(dir string, args []string) error {
	var rest []string
	for _, a := range args {
		if a != "--background" && a != "-background" && a != "--background=true" {
			rest = append(rest, a)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "logs", "up.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	_ = os.Remove(filepath.Join(dir, "cluster.json"))
	cmd := exec.Command(self, append([]string{"up"}, rest...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(3 * time.Minute)
	for {
		select {
		case err := <-done:
			return fmt.Errorf("up exited before it was ready (%v); see %s", err, logf.Name())
		case <-deadline:
			_ = cmd.Process.Kill()
			return fmt.Errorf("up not ready after 3 minutes; see %s", logf.Name())
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := os.Stat(filepath.Join(dir, "cluster.json")); err == nil {
			fmt.Printf("READY %s\n", filepath.Join(dir, "cluster.json"))
			fmt.Printf("export KUBECONFIG=%s\n", filepath.Join(dir, "admin.kubeconfig"))
			return nil
		}
	}
}

// component is one child process, started again whenever it exits until stop.
type component struct {
	name    string
	bin     string   // the program ("": this binary, running command `name`)
	env     []string // added to this process's environment
	args    []string
	logPath string
	pidPath string
	delay   time.Duration

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping bool
	exited   chan struct{}
}

func (c *component) start() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{c.name}, c.args...)...)
	if c.bin != "" {
		cmd = exec.Command(c.bin, c.args...)
	}
	cmd.Env = append(os.Environ(), c.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	_ = os.WriteFile(c.pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	c.mu.Lock()
	c.cmd = cmd
	c.exited = make(chan struct{})
	exited := c.exited
	c.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		close(exited)
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if stopping {
			return
		}
		fmt.Fprintf(os.Stderr, "%s exited (%v); starting it again in %s\n", c.name, err, c.delay)
		time.Sleep(c.delay)
		c.mu.Lock()
		stopping = c.stopping
		c.mu.Unlock()
		if !stopping {
			if err := c.start(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", c.name, err)
			}
		}
	}()
	return nil
}

func (c *component) stop() {
	c.mu.Lock()
	c.stopping = true
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
	_ = os.Remove(c.pidPath)
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
  verbs: [get, list, watch]
- level: None
  verbs: [get, list, watch]
- level: Request
  resources:
  - group: ""
    resources: [pods/binding, pods/eviction, pods/status]
- level: Metadata
`

func up(o upOptions) error {
	p, err := loadOrCreatePKI(o.dir)
	if err != nil {
		return err
	}
	if err := p.issue("apiserver", "kube-apiserver", nil,
		[]string{"127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "10.0.0.1"}); err != nil {
		return err
	}
	for _, c := range [][3]string{
		{"admin", "testcluster-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
	} {
		var groups []string
		if c[2] != "" {
			groups = []string{c[2]}
		}
		if err := p.issue(c[0], c[1], groups, nil); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	if o.port == 0 {
		if o.port, err = freePort(); err != nil {
			return err
		}
	}
	if o.etcdPort == 0 {
		if o.etcdPort, err = freePort(); err != nil {
			return err
		}
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", o.port)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", o.etcdPort)
	for _, name := range []string{"admin", "controller-manager", "scheduler"} {
		if err := p.kubeconfig(filepath.Join(o.dir, name+".kubeconfig"), server, name); err != nil {
			return err
		}
	}

	// etcd, in this process.
	cfg := embed.NewConfig()
	cfg.Name = "testcluster"
	cfg.Dir = filepath.Join(o.dir, "etcd")
	cu, _ := url.Parse(etcdURL)
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogOutputs = []string{filepath.Join(o.dir, "logs", "etcd.log")}
	cfg.UnsafeNoFsync = o.noFsync
	etcd, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	defer etcd.Close()
	select {
	case <-etcd.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return errors.New("etcd not ready after 60 s")
	}

	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", o.port),
		"--tls-cert-file=" + filepath.Join(o.dir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(o.dir, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(o.dir, "ca.crt"),
		"--service-account-key-file=" + filepath.Join(o.dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(o.dir, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--cert-dir=" + filepath.Join(o.dir, "apiserver-certs"),
		fmt.Sprintf("--watch-cache=%t", o.watchCache),
	}
	auditLog := ""
	if o.audit {
		policy := filepath.Join(o.dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return err
		}
		auditLog = filepath.Join(o.dir, "audit.log")
		apiArgs = append(apiArgs, "--audit-policy-file="+policy, "--audit-log-path="+auditLog,
			"--audit-log-maxsize=0")
	}
	apiArgs = append(apiArgs, o.apiserverArg...)
	var comps []*component
	defer func() {
		for i := len(comps) - 1; i >= 0; i-- {
			comps[i].stop()
		}
	}()
	newComp := func(name string, args []string) *component {
		c := &component{name: name, args: args, delay: o.restartDelay,
			logPath: filepath.Join(o.dir, "logs", name+".log"),
			pidPath: filepath.Join(o.dir, "pids", name)}
		comps = append(comps, c)
		return c
	}
	if err := newComp("kube-apiserver", apiArgs).start(); err != nil {
		return err
	}
	adminCfg := filepath.Join(o.dir, "admin.kubeconfig")
	if err := waitReady(o.dir, server, 2*time.Minute); err != nil {
		return err
	}
	if o.controllers != "" {
		// As the administrator: with --use-service-account-credentials=false every
		// controller acts as the manager's own user, whose ClusterRole covers too little for
		// node lifecycle (taints) and the garbage collector.
		if err := newComp("kube-controller-manager", append([]string{
			"--kubeconfig=" + adminCfg,
			"--authentication-kubeconfig=" + adminCfg,
			"--authorization-kubeconfig=" + adminCfg,
			"--controllers=" + o.controllers,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--root-ca-file=" + filepath.Join(o.dir, "ca.crt"),
			"--use-service-account-credentials=false",
		}, o.kcmArg...)).start(); err != nil {
			return err
		}
	}
	if o.kwok {
		kwokCfg := filepath.Join(o.dir, "kwok.yaml")
		if err := writeKwokConfig(kwokCfg); err != nil {
			return err
		}
		if err := newComp("kwok", append([]string{
			"--kubeconfig=" + adminCfg,
			"--config=" + kwokCfg,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-lease-duration-seconds=40",
			"--cidr=10.64.0.0/12",
		}, o.kwokArg...)).start(); err != nil {
			return err
		}
	}
	if o.workloads != "" {
		newWorkload := func(name, bin string, args, env []string) *component {
			c := newComp(name, args)
			c.bin, c.env = bin, env
			return c
		}
		if err := startWorkloads(o, p, adminCfg, newWorkload); err != nil {
			return err
		}
	}
	if err := prepare(o, adminCfg); err != nil {
		return err
	}
	info := clusterInfo{Server: server, Etcd: etcdURL, Kubeconfig: adminCfg, AuditLog: auditLog,
		Pid: os.Getpid(), Version: kubeVersion}
	raw, _ := json.MarshalIndent(info, "", "  ")
	tmp := filepath.Join(o.dir, "cluster.json.tmp")
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dir, "up.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(o.dir, "cluster.json")); err != nil {
		return err
	}
	fmt.Printf("READY %s\n", filepath.Join(o.dir, "cluster.json"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping")
	_ = os.Remove(filepath.Join(o.dir, "cluster.json"))
	_ = os.Remove(filepath.Join(o.dir, "up.pid"))
	return nil
}

// prepare applies the --apply manifests and creates the --gpu-nodes, as the administrator.
func prepare(o upOptions, kubeconfig string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, m := range o.apply {
		cmd := exec.Command(self, "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", m)
		cmd.Env = append(os.Environ(), "HOME="+o.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %v\n%s", m, err, out)
		}
	}
	if o.gpuNodes == 0 {
		return nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return ensureNodes(ctx, cs, o.gpuNodes)
}

// waitReady polls /readyz with the admin certificate until it answers 200.
func waitReady(dir, server string, timeout time.Duration) error {
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key"))
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		resp, err := client.Get(server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (%s); see %s", timeout, last,
		filepath.Join(dir, "logs", "kube-apiserver.log"))
}

// runDown stops the cluster `up --dir DIR` started.
func runDown(args []string) error {
	fs := flag.NewFlagSet("down", flag.ContinueOnError)
	dir := fs.String("dir", "", "the directory given to up (required)")
	purge := fs.Bool("purge", false, "also remove the directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("down: --dir is required")
	}
	raw, err := os.ReadFile(filepath.Join(*dir, "up.pid"))
	if err == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		if pid > 0 && syscall.Kill(pid, syscall.SIGTERM) == nil {
			deadline := time.Now().Add(30 * time.Second)
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if syscall.Kill(pid, 0) == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if *purge {
		return os.RemoveAll(*dir)
	}
	return nil
}
