package main

// `testcluster bench`: one scheduler against the real API server of `up --dir D`, on KWOK
// nodes this command creates, timed by a watch of pods (each pod's bind is the first event
// that shows its nodeName). Schedulers: "bare" (this process binds with N goroutines, the
// ceiling a client reaches), "tessera" (tessera kube, a child process), "kube-scheduler" (the
// same module's, a child process, at the client QPS/burst given). Prints one JSON line.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type benchOptions struct {
	dir, scheduler, tessera, mode, namespace string
	nodes, pods, gangSize, threads           int
	qps, burst                               float64
	rate                                     float64 // pods/s created (latency mode)
	timeout                                  time.Duration
	events                                   bool // bare: a Scheduled event after each bind
}

type benchResult struct {
	Scheduler     string  `json:"scheduler"`
	Mode          string  `json:"mode"`
	Nodes         int     `json:"nodes"`
	Pods          int     `json:"pods"`
	Bound         int     `json:"bound"`
	QPS           float64 `json:"client_qps,omitempty"`
	FirstBindS    float64 `json:"start_to_first_bind_s"`
	AllBoundS     float64 `json:"start_to_all_bound_s"`
	BindsPerS     float64 `json:"binds_per_s"` // first bind to last
	P50S          float64 `json:"create_to_bind_p50_s,omitempty"`
	P99S          float64 `json:"create_to_bind_p99_s,omitempty"`
	RateAsked     float64 `json:"arrival_per_s,omitempty"`
	PartialGangs  *int    `json:"partial_gangs,omitempty"` // gangs with some, not all, bound
	KubeVersion   string  `json:"kube_version"`
	SchedulerArgs string  `json:"scheduler_args,omitempty"`
	Events        bool    `json:"events,omitempty"` // bare: each bind followed by its event
}

func runBench(args []string) error {
	var o benchOptions
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "the directory of a cluster `up` started (required)")
	fs.StringVar(&o.scheduler, "scheduler", "bare", "bare | tessera | kube-scheduler")
	fs.StringVar(&o.tessera, "tessera", "", "the tessera binary (--scheduler tessera)")
	fs.StringVar(&o.mode, "mode", "throughput", "throughput (pods pending, then the scheduler starts) | latency (pods arrive at --rate) | gangs (--gang-size pods per PodGroup) | restart (the cluster full of bound pods but 100 GPUs, then max(--pods, 100) pending: 100 fit)")
	fs.StringVar(&o.namespace, "namespace", "bench", "namespace of the pods")
	fs.IntVar(&o.nodes, "nodes", 100, "KWOK nodes of 8 GPUs to create (none when the cluster has them)")
	fs.IntVar(&o.pods, "pods", 1000, "1-GPU pods")
	fs.IntVar(&o.gangSize, "gang-size", 8, "pods per PodGroup (--mode gangs)")
	fs.IntVar(&o.threads, "threads", 16, "binding goroutines (--scheduler bare)")
	fs.BoolVar(&o.events, "events", false, "--scheduler bare: write a Scheduled event (events.k8s.io/v1) after each bind, the two writes a scheduler makes per pod")
	fs.Float64Var(&o.qps, "qps", 50, "kube-scheduler's client QPS (burst: twice this, as its defaults 50/100)")
	fs.Float64Var(&o.burst, "burst", 0, "kube-scheduler's client burst (0: twice --qps)")
	fs.Float64Var(&o.rate, "rate", 100, "pods created per second (--mode latency)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.dir == "" {
		return errors.New("bench: --dir is required")
	}
	if o.burst == 0 {
		o.burst = 2 * o.qps
	}
	kubeconfig := filepath.Join(o.dir, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100000, 100000 // the driver is not what is measured
	cfg.UserAgent = "testcluster-bench"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := ensureNodes(ctx, cs, o.nodes); err != nil {
		return err
	}
	_, _ = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}}, metav1.CreateOptions{})
	if err := waitServiceAccount(ctx, cs, o.namespace); err != nil {
		return err
	}
	schedName := map[string]string{"bare": "bench-bare", "tessera": "tessera", "kube-scheduler": "default-scheduler"}[o.scheduler]
	if schedName == "" {
		return fmt.Errorf("bench: unknown --scheduler %q", o.scheduler)
	}
	res := benchResult{Scheduler: o.scheduler, Mode: o.mode, Nodes: o.nodes, Pods: o.pods, KubeVersion: kubeVersion, Events: o.events && o.scheduler == "bare"}
	if o.scheduler == "kube-scheduler" {
		res.QPS = o.qps
	}
	w := newBindWatch()
	go w.run(ctx, cs, o.namespace)
	if err := w.waitSynced(ctx); err != nil {
		return err
	}

	capacity := o.nodes * 8
	expect := min(o.pods, capacity)
	var gangs int
	switch o.mode {
	case "throughput", "restart":
		if o.mode == "restart" {
			// The cluster full of bound pods (bound by this process), then 100 pending.
			fill := capacity - 100
			if err := createPods(ctx, cs, o, "bench-bare", "bound", fill, nil); err != nil {
				return err
			}
			if err := bareBind(ctx, cs, o, w.pendingNames("bound"), 0, false); err != nil {
				return err
			}
			expect = 100
		}
		if err := createPods(ctx, cs, o, schedName, "p", ifElse(o.mode == "restart", max(o.pods, 100), o.pods), nil); err != nil {
			return err
		}
	case "gangs":
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return err
		}
		gangs = o.pods / o.gangSize
		if err := createGangs(ctx, cs, dyn, o, schedName, gangs); err != nil {
			return err
		}
		expect = min(gangs*o.gangSize, capacity/o.gangSize*o.gangSize)
	case "latency":
	default:
		return fmt.Errorf("bench: unknown --mode %q", o.mode)
	}

	start := time.Now()
	stop, schedArgs, err := startScheduler(ctx, o, w)
	if err != nil {
		return err
	}
	defer stop()
	res.SchedulerArgs = schedArgs
	var created map[string]time.Time
	if o.mode == "latency" {
		created = map[string]time.Time{}
		var mu sync.Mutex
		if err := createPods(ctx, cs, o, schedName, "p", o.pods, func(name string, t time.Time) {
			mu.Lock()
			created[name] = t
			mu.Unlock()
		}); err != nil {
			return err
		}
		res.RateAsked = o.rate
	}
	prefix := ifElse(o.mode == "gangs", "g", "p")
	if err := w.waitBound(ctx, prefix, expect); err != nil {
		res.Bound = w.count(prefix)
		out, _ := json.Marshal(res)
		fmt.Println(string(out))
		return err
	}
	times := w.times(prefix)
	res.Bound = len(times)
	first, last := times[0].t, times[len(times)-1].t
	res.FirstBindS = first.Sub(start).Seconds()
	res.AllBoundS = last.Sub(start).Seconds()
	if len(times) > 1 && last.After(first) {
		res.BindsPerS = float64(len(times)-1) / last.Sub(first).Seconds()
	}
	if created != nil {
		var lat []float64
		for _, b := range times {
			if c, ok := created[b.name]; ok {
				lat = append(lat, b.t.Sub(c).Seconds())
			}
		}
		sort.Float64s(lat)
		res.P50S = lat[len(lat)/2]
		res.P99S = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	if o.mode == "gangs" {
		time.Sleep(2 * time.Second)
		partial := w.partialGangs(o.gangSize)
		res.PartialGangs = &partial
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	return nil
}

func ifElse[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

// ensureNodes creates KWOK nodes node-00000.. up to n and waits until all are Ready and
// untainted (the node lifecycle controller lifts node.kubernetes.io/not-ready).
func ensureNodes(ctx context.Context, cs kubernetes.Interface, n int) error {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, node := range list.Items {
		have[node.Name] = true
	}
	err = parallel(32, n, nil, func(i int) error {
		name := fmt.Sprintf("node-%05d", i)
		if have[name] {
			return nil
		}
		q := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1536Gi"),
			corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": resource.MustParse("8"),
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok",
					"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
			Status: corev1.NodeStatus{Capacity: q, Allocatable: q},
		}
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for _, node := range list.Items {
			ok := len(node.Spec.Taints) == 0
			cond := false
			for _, c := range node.Status.Conditions {
				cond = cond || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if ok && cond {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return ctx.Err()
}

func waitServiceAccount(ctx context.Context, cs kubernetes.Interface, ns string) error {
	for ctx.Err() == nil {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ctx.Err()
}

func podObject(ns, name, schedulerName, group string) *corev1.Pod {
	q := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"),
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulerName: schedulerName,
			Containers:    []corev1.Container{{Name: "main", Image: "trainer", Resources: corev1.ResourceRequirements{Limits: q, Requests: q}}},
			Tolerations:   []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
		},
	}
	if group != "" {
		p.Labels["scheduling.x-k8s.io/pod-group"] = group
	}
	return p
}

// createPods creates PREFIX-0..n-1 with 16 goroutines, at --rate when onCreate is set.
func createPods(ctx context.Context, cs kubernetes.Interface, o benchOptions, schedulerName, prefix string, n int, onCreate func(string, time.Time)) error {
	begin := time.Now()
	var pace func(int)
	if onCreate != nil {
		pace = func(i int) {
			time.Sleep(time.Until(begin.Add(time.Duration(float64(i) / o.rate * float64(time.Second)))))
		}
	}
	return parallel(16, n, pace, func(i int) error {
		name := fmt.Sprintf("%s-%06d", prefix, i)
		t := time.Now()
		if _, err := cs.CoreV1().Pods(o.namespace).Create(ctx, podObject(o.namespace, name, schedulerName, ""), metav1.CreateOptions{}); err != nil {
			return err
		}
		if onCreate != nil {
			onCreate(name, t)
		}
		return nil
	})
}

func createGangs(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, o benchOptions, schedulerName string, gangs int) error {
	gvr := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	return parallel(16, gangs, nil, func(g int) error {
		name := fmt.Sprintf("g-%05d", g)
		pg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": name, "namespace": o.namespace},
			"spec":     map[string]any{"minMember": int64(o.gangSize)},
		}}
		if _, err := dyn.Resource(gvr).Namespace(o.namespace).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			return err
		}
		for i := range o.gangSize {
			p := podObject(o.namespace, fmt.Sprintf("%s-%02d", name, i), schedulerName, name)
			if _, err := cs.CoreV1().Pods(o.namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
}

// bareBind binds the named pods, 8 to a node from node index `first`, with --threads
// goroutines: what a client that decides nothing reaches.
func bareBind(ctx context.Context, cs kubernetes.Interface, o benchOptions, names []string, first int, events bool) error {
	return parallel(o.threads, len(names), nil, func(i int) error {
		node := fmt.Sprintf("node-%05d", first+i/8)
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: o.namespace},
			Target: corev1.ObjectReference{Kind: "Node", Name: node}}
		if err := cs.CoreV1().Pods(o.namespace).Bind(ctx, b, metav1.CreateOptions{}); err != nil || !events {
			return err
		}
		// Named as client-go names events (the API server refuses a generateName ending in '.').
		ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", names[i], time.Now().UnixNano()), Namespace: o.namespace},
			EventTime:           metav1.NowMicro(),
			ReportingController: "bench-bare",
			ReportingInstance:   "bench-bare",
			Action:              "Binding",
			Reason:              "Scheduled",
			Type:                corev1.EventTypeNormal,
			Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: o.namespace, Name: names[i]},
			Note:                "Successfully assigned " + o.namespace + "/" + names[i] + " to " + node,
		}
		_, err := cs.EventsV1().Events(o.namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
}

// parallel runs do(0..n-1) on `workers` goroutines, handing out i after pace(i) (nil: at
// once), and returns the first error.
func parallel(workers, n int, pace func(i int), do func(i int) error) error {
	var firstErr atomic.Value
	var wg sync.WaitGroup
	work := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for i := range n {
		if pace != nil {
			pace(i)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return e.(error)
	}
	return nil
}

func startScheduler(ctx context.Context, o benchOptions, w *bindWatch) (func(), string, error) {
	switch o.scheduler {
	case "bare":
		go func() {
			names := w.waitPending(ctx, "p", min(o.pods, o.nodes*8))
			_ = bareBind(ctx, binderClient(o), o, names, 0, o.events)
		}()
		return func() {}, fmt.Sprintf("threads=%d events=%v", o.threads, o.events), nil
	case "tessera":
		if o.tessera == "" {
			return nil, "", errors.New("bench: --tessera PATH is needed")
		}
		args := []string{"kube", "--kubeconfig", filepath.Join(o.dir, "admin.kubeconfig"), "--listen", "127.0.0.1:0"}
		return startChild(o, o.tessera, args)
	case "kube-scheduler":
		cfgPath := filepath.Join(o.dir, "kube-scheduler-bench.yaml")
		cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %s
  qps: %g
  burst: %d
`, filepath.Join(o.dir, "scheduler.kubeconfig"), o.qps, int(o.burst))
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			return nil, "", err
		}
		self, err := os.Executable()
		if err != nil {
			return nil, "", err
		}
		return startChild(o, self, []string{"kube-scheduler", "--config", cfgPath, "--secure-port=0"})
	}
	return nil, "", fmt.Errorf("unknown scheduler %q", o.scheduler)
}

// binderClient gives the bare binder a client of its own (its own connection pool).
func binderClient(o benchOptions) kubernetes.Interface {
	cfg, _ := clientcmd.BuildConfigFromFlags("", filepath.Join(o.dir, "admin.kubeconfig"))
	cfg.QPS, cfg.Burst = 100000, 100000
	cfg.UserAgent = "testcluster-bench-binder"
	cs, _ := kubernetes.NewForConfig(cfg)
	return cs
}

func startChild(o benchOptions, bin string, args []string) (func(), string, error) {
	logf, err := os.Create(filepath.Join(o.dir, "logs", "bench-"+o.scheduler+".log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	}, fmt.Sprint(args), nil
}

type bindTime struct {
	name string
	t    time.Time
}

// bindWatch keeps, per pod, when the watch first showed it bound.
type bindWatch struct {
	mu      sync.Mutex
	synced  chan struct{}
	bound   map[string]time.Time
	node    map[string]string
	pending map[string]bool
	changed chan struct{}
}

func newBindWatch() *bindWatch {
	return &bindWatch{synced: make(chan struct{}), bound: map[string]time.Time{}, node: map[string]string{},
		pending: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (w *bindWatch) see(p *corev1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.Spec.NodeName == "" {
		w.pending[p.Name] = true
	} else if _, ok := w.bound[p.Name]; !ok {
		delete(w.pending, p.Name)
		w.bound[p.Name] = now
		w.node[p.Name] = p.Spec.NodeName
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *bindWatch) run(ctx context.Context, cs kubernetes.Interface, ns string) {
	once := sync.Once{}
	for ctx.Err() == nil {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			w.see(&list.Items[i], time.Now())
		}
		once.Do(func() { close(w.synced) })
		watch, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
		if err != nil {
			continue
		}
		for ev := range watch.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				w.see(p, time.Now())
			}
		}
	}
}

func (w *bindWatch) waitSynced(ctx context.Context) error {
	select {
	case <-w.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func hasPrefix(name, prefix string) bool {
	return len(name) > len(prefix) && name[:len(prefix)+1] == prefix+"-"
}

func (w *bindWatch) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for name := range w.bound {
		if hasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

func (w *bindWatch) waitBound(ctx context.Context, prefix string, n int) error {
	for w.count(prefix) < n {
		select {
		case <-w.changed:
		case <-time.After(time.Second):
		case <-ctx.Done():
			return fmt.Errorf("bench: %d of %d pods bound when it gave up", w.count(prefix), n)
		}
	}
	return nil
}

// waitPending returns the names of n pending pods of the prefix once the watch has them.
func (w *bindWatch) waitPending(ctx context.Context, prefix string, n int) []string {
	for ctx.Err() == nil {
		names := w.pendingNames(prefix)
		if len(names) >= n {
			return names[:n]
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (w *bindWatch) pendingNames(prefix string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for name := range w.pending {
		if hasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (w *bindWatch) times(prefix string) []bindTime {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []bindTime
	for name, t := range w.bound {
		if hasPrefix(name, prefix) {
			out = append(out, bindTime{name, t})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].t.Before(out[j].t) })
	return out
}

// partialGangs counts gangs (g-NNNNN-MM) with some but not all of size members bound.
func (w *bindWatch) partialGangs(size int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	per := map[string]int{}
	for name := range w.bound {
		if hasPrefix(name, "g") && len(name) > 3 {
			per[name[:len(name)-3]]++
		}
	}
	n := 0
	for _, c := range per {
		if c != size {
			n++
		}
	}
	return n
}
