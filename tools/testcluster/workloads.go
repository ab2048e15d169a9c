package main

// `testcluster up --workloads DIR`: the workload controllers users run beside a scheduler
// (JobSet, LeaderWorkerSet, Kubeflow's training-operator, KubeRay), built from their Go modules by tools/workloads/build.sh
// into DIR/<name>/ (the binary `controller`, its CRDs in crds/, its admission webhooks in
// webhooks.yaml). For each one present: its CRDs are applied, its webhooks registered at
// https://127.0.0.1:PORT with a serving certificate from the cluster's CA (no Service: the
// controller runs here, not in a pod), and the controller started and restarted as the
// cluster's other components are.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// workload is how one controller is run.
type workload struct {
	name string
	// The label every pod of its workloads carries: its pod webhook sees only those (as the
	// projects' own deployments select them), so that other pods never wait on it.
	podLabel string
	// Its arguments, given the config file path and the webhook port.
	args func(config string) []string
	// Its configuration file (empty: none), given the webhook port and certificate directory.
	config func(port int, certDir string) string
	// A controller that makes its own serving certificate (for an in-cluster Service name, so
	// not one the API server could call here): run with a webhook port, env and what it needs
	// set up first, its webhooks not called.
	ownCerts func(port int) (args, env []string)
	prepare  func(kubectl func(args ...string) error, runDir string) error
	// The Secret its certificate rotator writes, and where the controller reads it: a pod
	// would have it mounted there by the kubelet; here testcluster copies it.
	certSecret, certSecretNS, certMount string
}

// managerConfig is the Configuration file of a controller-runtime manager of this API version
// (JobSet's and LWS's share its shape): no leader election, metrics or probes, and a webhook
// server on 127.0.0.1 with the certificate testcluster issued, not one it rotates itself.
func managerConfig(apiVersion string) func(port int, certDir string) string {
	return func(port int, certDir string) string {
		return fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {port: %d, host: 127.0.0.1, certDir: %s}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "0"}
`, apiVersion, port, certDir)
	}
}

var workloads = []workload{
	{
		name:     "jobset",
		podLabel: "jobset.sigs.k8s.io/jobset-name",
		args:     func(config string) []string { return []string{"--config=" + config, "--zap-log-level=info"} },
		config:   managerConfig("config.jobset.x-k8s.io/v1alpha1"),
	},
	{
		name:     "lws",
		podLabel: "leaderworkerset.sigs.k8s.io/name",
		args:     func(config string) []string { return []string{"--config=" + config, "--zap-log-level=info"} },
		config:   managerConfig("config.lws.x-k8s.io/v1alpha1"),
	},
	{
		// Kubeflow's training-operator (PyTorchJob) with --gang-scheduler-name=tessera: it
		// writes scheduler-plugins PodGroups and names tessera in its pods. Its cert rotator
		// needs its Secret and its ValidatingWebhookConfiguration to exist (it injects its CA
		// there before the controllers start); the configuration here matches no request: the
		// rotator's certificate names the in-cluster Service only.
		name:         "training",
		certSecret:   "training-operator-webhook-cert",
		certSecretNS: "kubeflow",
		certMount:    "/tmp/k8s-webhook-server/serving-certs",
		ownCerts: func(port int) ([]string, []string) {
			return []string{"--gang-scheduler-name=tessera", "--enable-scheme=pytorchjob",
					"--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false",
					"--webhook-server-port=" + strconv.Itoa(port)},
				[]string{"MY_POD_NAMESPACE=kubeflow"}
		},
		prepare: func(kubectl func(args ...string) error, runDir string) error {
			objects := `apiVersion: v1
kind: Namespace
metadata: {name: kubeflow}
---
apiVersion: v1
kind: Secret
metadata: {name: training-operator-webhook-cert, namespace: kubeflow}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validator.training-operator.kubeflow.org}
webhooks:
- name: validator.pytorchjob.training-operator.kubeflow.org
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig: {url: "https://127.0.0.1:1/validate-kubeflow-org-v1-pytorchjob"}
  rules: []
`
			path := filepath.Join(runDir, "training-setup.yaml")
			if err := os.WriteFile(path, []byte(objects), 0o644); err != nil {
				return err
			}
			return kubectl("apply", "-f", path)
		},
	},
	{
		// KubeRay's webhooks are off unless ENABLE_WEBHOOKS=true: none registered.
		name: "kuberay",
		args: func(string) []string {
			return []string{"--metrics-addr=0", "--health-probe-bind-address=0", "--enable-leader-election=false"}
		},
	},
}

// startWorkloads starts the controllers found in dir; it returns once each one's webhook
// server answers (a webhook that does not answer fails the API requests it covers).
func startWorkloads(o upOptions, p *pki, kubeconfig string, newComp func(name, bin string, args, env []string) *component) error {
	dir, err := filepath.Abs(o.workloads)
	if err != nil {
		return err
	}
	runDir := filepath.Join(o.dir, "workloads")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	kubectl := func(args ...string) error {
		cmd := exec.Command(self, append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+o.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	started := 0
	for _, w := range workloads {
		bin := filepath.Join(dir, w.name, "controller")
		if _, err := os.Stat(bin); err != nil {
			continue
		}
		// Server-side: KubeRay's CRDs are larger than client-side apply's annotation allows.
		if err := kubectl("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(dir, w.name, "crds")); err != nil {
			return err
		}
		// Asked again: kubectl wait fails outright on a CRD whose status has no conditions yet.
		for try := 0; ; try++ {
			err := kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", filepath.Join(dir, w.name, "crds"))
			if err == nil {
				break
			}
			if try == 20 {
				return err
			}
			time.Sleep(250 * time.Millisecond)
		}
		var args, env []string
		if w.args != nil {
			args = w.args("")
		}
		port := 0
		if w.prepare != nil {
			if err := w.prepare(kubectl, runDir); err != nil {
				return err
			}
		}
		if w.ownCerts != nil {
			p, err := freePort()
			if err != nil {
				return err
			}
			args, env = w.ownCerts(p)
		}
		if w.config != nil {
			if port, err = freePort(); err != nil {
				return err
			}
			certDir := filepath.Join(runDir, w.name+"-certs")
			if err := os.MkdirAll(certDir, 0o755); err != nil {
				return err
			}
			if err := p.issueTo(certDir, w.name+"-webhook", []string{"127.0.0.1"}); err != nil {
				return err
			}
			config := filepath.Join(runDir, w.name+".yaml")
			if err := os.WriteFile(config, []byte(w.config(port, certDir)), 0o644); err != nil {
				return err
			}
			args = w.args(config)
		}
		if err := newComp(w.name, bin, args, append(env, "KUBECONFIG="+kubeconfig)).start(); err != nil {
			return err
		}
		if w.certSecret != "" {
			if err := mountSecret(kubeconfig, w.certSecretNS, w.certSecret, w.certMount, time.Minute); err != nil {
				return fmt.Errorf("%s's certificate: %v (see logs/%s.log)", w.name, err, w.name)
			}
		}
		if port != 0 {
			if err := waitTLS(port, p, 2*time.Minute); err != nil {
				return fmt.Errorf("%s's webhook server: %v (see logs/%s.log)", w.name, err, w.name)
			}
			hooks, err := webhookConfigs(filepath.Join(dir, w.name, "webhooks.yaml"), w, port, p)
			if err != nil {
				return err
			}
			path := filepath.Join(runDir, w.name+"-webhooks.yaml")
			if err := os.WriteFile(path, hooks, 0o644); err != nil {
				return err
			}
			if err := kubectl("apply", "-f", path); err != nil {
				return err
			}
		}
		started++
	}
	if started == 0 {
		return fmt.Errorf("--workloads %s: no controller built there (tools/workloads/build.sh)", dir)
	}
	return nil
}

// webhookConfigs rewrites the project's webhook configurations for a controller on this host:
// names prefixed with the controller's, each webhook called at its URL on `port`, trusting the
// cluster's CA, and pod webhooks limited to the workload's own pods.
func webhookConfigs(path string, w workload, port int, p *pki) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(p.dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, doc := range strings.Split(string(raw), "\n---") {
		var obj map[string]interface{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]interface{})
		if meta == nil {
			return nil, fmt.Errorf("%s: a document without metadata", path)
		}
		meta["name"] = w.name + "-" + fmt.Sprint(meta["name"])
		hooks, _ := obj["webhooks"].([]interface{})
		for _, h := range hooks {
			hook, _ := h.(map[string]interface{})
			cc, _ := hook["clientConfig"].(map[string]interface{})
			svc, _ := cc["service"].(map[string]interface{})
			if svc == nil {
				return nil, fmt.Errorf("%s: webhook %v has no clientConfig.service", path, hook["name"])
			}
			hook["clientConfig"] = map[string]interface{}{
				"url":      "https://127.0.0.1:" + strconv.Itoa(port) + fmt.Sprint(svc["path"]),
				"caBundle": base64.StdEncoding.EncodeToString(caPEM),
			}
			if strings.Contains(fmt.Sprint(hook["clientConfig"]), "-v1-pod") && w.podLabel != "" {
				hook["objectSelector"] = map[string]interface{}{
					"matchExpressions": []interface{}{map[string]interface{}{"key": w.podLabel, "operator": "Exists"}},
				}
			}
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return []byte(strings.Join(out, "---\n")), nil
}

// waitTLS waits until a TLS server trusted by the cluster's CA answers on 127.0.0.1:port.
func waitTLS(port int, p *pki, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AddCert(p.caCert)
	deadline := time.Now().Add(timeout)
	for {
		c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{RootCAs: pool})
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mountSecret waits until Secret ns/name holds a serving certificate (tls.crt, tls.key) and
// writes its keys as files into dir, as a Secret volume would show them.
func mountSecret(kubeconfig, ns, name, dir string, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		sec, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && len(sec.Data["tls.crt"]) > 0 && len(sec.Data["tls.key"]) > 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for k, v := range sec.Data {
				if err := os.WriteFile(filepath.Join(dir, k), v, 0o600); err != nil {
					return err
				}
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("secret %s/%s has no tls.crt after %s (%v)", ns, name, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
