package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"tradergate/internal/testkit"
	"tradergate/proxy"
	"tradergate/proxy/config"
)

// The chart in helm/tradergate, rendered by the real helm over its default
// values and each file of helm/tradergate/ci, every manifest decoded
// strictly into the Kubernetes API types (a field the API does not have is
// an error, as the API server's strict field validation makes it), and the
// links between them checked: ports, probes, the configuration, the rules.

const chartDir = "helm/tradergate"

// kubeVersion is the cluster version the chart is rendered for: the oldest
// it supports (Chart.yaml kubeVersion; the preStop sleep action is on by
// default from 1.30).
const kubeVersion = "1.30.0"

// helmBin finds helm on PATH or where `go install` puts it. Missing, the
// test skips, or fails when CI is set (.ci/run installs it).
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if p := filepath.Join(build.Default.GOPATH, "bin", "helm"); fileExists(p) {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("helm not on PATH nor in $(go env GOPATH)/bin and CI is set: .ci/run installs it with go install")
	}
	t.Skip("helm not on PATH nor in $(go env GOPATH)/bin, skipping (go install helm.sh/helm/v3/cmd/helm@v3.22.0; with CI set this fails)")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// helm runs helm with args and returns its standard output.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helmBin(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	// A warning on every command (a symbolic link in the chart, say) is
	// noise an operator learns to ignore.
	if stderr.Len() > 0 {
		t.Errorf("helm %s warned:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stdout.Bytes()
}

// helmRun runs helm with args and returns its output, both streams, and
// its error, for a command that may fail.
func helmRun(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, helmBin(t), args...).CombinedOutput()
}

// valueFiles are the cases: "" for the default values, then every file
// under ci/.
func valueFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 value files under %s/ci, got %v (%v)", chartDir, files, err)
	}
	return append([]string{""}, files...)
}

func caseName(values string) string {
	if values == "" {
		return "default"
	}
	return strings.TrimSuffix(filepath.Base(values), ".yaml")
}

// serviceMonitor and prometheusRule are the Prometheus Operator's CRDs
// (monitoring.coreos.com/v1), reduced to the fields the chart sets; the
// strict decoder refuses any other.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			Authorization *struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleFile `json:"spec"`
}

// ruleFile is a Prometheus rule file, which a PrometheusRule's spec is.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Record        string            `json:"record,omitempty"`
			Alert         string            `json:"alert,omitempty"`
			Expr          string            `json:"expr"`
			For           string            `json:"for,omitempty"`
			KeepFiringFor string            `json:"keep_firing_for,omitempty"`
			Labels        map[string]string `json:"labels,omitempty"`
			Annotations   map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

// rendered is one rendering of the chart, decoded.
type rendered struct {
	deployment     *appsv1.Deployment
	configMaps     map[string]*corev1.ConfigMap
	services       map[string]*corev1.Service
	serviceAccount *corev1.ServiceAccount
	pdb            *policyv1.PodDisruptionBudget
	hpa            *autoscalingv2.HorizontalPodAutoscaler
	serviceMonitor *serviceMonitor
	rule           *prometheusRule
	secrets        map[string]*corev1.Secret
}

// ciKeys is a keys section as the apiKeys Secret holds it.
var ciKeys = "keys:\n  - {id: ci, sha256: \"" + proxy.HashKey("ci-key") + "\", plan: free, routes: [\"*\"]}\n"

// replicaMemory is README's sizing rule ("Running at scale", Memory): a
// replica needs 1.5 x cache.max_bytes + 64 MiB, here in whole MiB rounded
// up, as the chart and the unit write it.
func replicaMemory(maxBytes int64) int64 {
	return (maxBytes*3/2 + 64<<20 + 1<<20 - 1) >> 20 << 20
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// render runs helm template and decodes every manifest strictly.
func render(t *testing.T, values string) rendered {
	t.Helper()
	args := []string{"template", "edge", chartDir, "--namespace", "edge", "--kube-version", kubeVersion}
	if values != "" {
		args = append(args, "-f", values)
	}
	return decodeManifests(t, helm(t, args...))
}

// decodeManifests decodes the manifests helm template printed, strictly.
func decodeManifests(t *testing.T, out []byte) rendered {
	t.Helper()
	r := rendered{configMaps: map[string]*corev1.ConfigMap{}, services: map[string]*corev1.Service{}, secrets: map[string]*corev1.Secret{}}
	for _, doc := range docSep.Split(string(out), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("a manifest is not YAML: %v\n%s", err, doc)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			r.deployment = new(appsv1.Deployment)
			obj = r.deployment
		case "v1 ConfigMap":
			obj = new(corev1.ConfigMap)
		case "v1 Service":
			obj = new(corev1.Service)
		case "v1 Secret":
			obj = new(corev1.Secret)
		case "v1 ServiceAccount":
			r.serviceAccount = new(corev1.ServiceAccount)
			obj = r.serviceAccount
		case "policy/v1 PodDisruptionBudget":
			r.pdb = new(policyv1.PodDisruptionBudget)
			obj = r.pdb
		case "autoscaling/v2 HorizontalPodAutoscaler":
			r.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
			obj = r.hpa
		case "monitoring.coreos.com/v1 ServiceMonitor":
			r.serviceMonitor = new(serviceMonitor)
			obj = r.serviceMonitor
		case "monitoring.coreos.com/v1 PrometheusRule":
			r.rule = new(prometheusRule)
			obj = r.rule
		default:
			t.Fatalf("a manifest of a kind the test does not know: %s %s", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", tm.Kind, err, doc)
		}
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *corev1.Secret:
			r.secrets[o.Name] = o
		}
	}
	if r.deployment == nil {
		t.Fatal("no Deployment rendered")
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestHelmLint(t *testing.T) {
	for _, values := range valueFiles(t) {
		t.Run(caseName(values), func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir}
			if values != "" {
				args = append(args, "-f", values)
			}
			helm(t, args...)
		})
	}
}

// TestHelmTemplate renders every case and checks what links the parts.
func TestHelmTemplate(t *testing.T) {
	for _, values := range valueFiles(t) {
		t.Run(caseName(values), func(t *testing.T) {
			r := render(t, values)
			d := r.deployment
			pod := d.Spec.Template.Spec
			edge := container(t, pod.Containers, "tradergate")

			cmName := d.Name
			cm := r.configMaps[cmName]
			if cm == nil {
				t.Fatalf("no ConfigMap %s", cmName)
			}
			text := cm.Data["config.yaml"]
			cfg := checkConfig(t, r, text)

			// A configuration change rolls the pods.
			sum := sha256.Sum256([]byte(strings.TrimSuffix(text, "\n")))
			if got := d.Spec.Template.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
				t.Errorf("checksum/config = %q, not the checksum of the ConfigMap's config.yaml", got)
			}

			// Ports: the Service to server.listen, the admin Service and
			// the probes to admin.listen.
			edgePort := port(t, cfg.Server.Listen)
			adminPort := port(t, cfg.Admin.Listen)
			if p := containerPort(t, edge, "edge"); p != edgePort {
				t.Errorf("container port edge = %d, server.listen is %s", p, cfg.Server.Listen)
			}
			if p := containerPort(t, edge, "admin"); p != adminPort {
				t.Errorf("container port admin = %d, admin.listen is %s", p, cfg.Admin.Listen)
			}
			svc := r.services[d.Name]
			if svc == nil {
				t.Fatalf("no Service %s", d.Name)
			}
			checkTarget(t, svc, "edge", edge, edgePort)
			if cfg.Server.TLS.Mode != "off" && *cfg.Server.TLS.HTTPListen != "" {
				checkTarget(t, svc, "plain", edge, port(t, *cfg.Server.TLS.HTTPListen))
			}
			admin := r.services[d.Name+"-admin"]
			if admin == nil {
				t.Fatalf("no Service %s-admin", d.Name)
			}
			checkTarget(t, admin, "admin", edge, adminPort)
			for _, s := range []*corev1.Service{svc, admin} {
				if !selects(s.Spec.Selector, d.Spec.Template.Labels) {
					t.Errorf("Service %s selects %v, the pods carry %v", s.Name, s.Spec.Selector, d.Spec.Template.Labels)
				}
			}
			for name, probe := range map[string]*corev1.Probe{"readiness": edge.ReadinessProbe, "liveness": edge.LivenessProbe} {
				want := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}[name]
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want {
					t.Errorf("%s probe = %+v, want GET %s", name, probe, want)
					continue
				}
				if p := targetPort(t, edge, probe.HTTPGet.Port); p != adminPort {
					t.Errorf("%s probe on port %d, the admin listener is on %d", name, p, adminPort)
				}
			}

			want := replicaMemory(cfg.Cache.MaxBytes)
			for kind, rl := range map[string]corev1.ResourceList{"request": edge.Resources.Requests, "limit": edge.Resources.Limits} {
				if got := rl.Memory().Value(); got != want {
					t.Errorf("memory %s = %d, want %d (1.5 x cache.max_bytes %d + 64 MiB)", kind, got, want, cfg.Cache.MaxBytes)
				}
			}

			// Stopping: preStop, then the edge's own drain, inside the
			// grace period.
			pre := edge.Lifecycle.PreStop
			if pre == nil || pre.Sleep == nil {
				t.Fatal("no preStop sleep")
			}
			drain := time.Duration(pre.Sleep.Seconds)*time.Second + cfg.Server.DrainDelay + cfg.Server.ShutdownTimeout
			if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= drain {
				t.Errorf("terminationGracePeriodSeconds %v is not past preStop + drain_delay + shutdown_timeout (%v)", grace, drain)
			}

			checkSecurity(t, pod)

			// The autoscaler, the budget and the monitor point at these
			// pods.
			if r.hpa != nil {
				if ref := r.hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
					t.Errorf("HPA scales %s %s", ref.Kind, ref.Name)
				}
				if d.Spec.Replicas != nil {
					t.Error("the Deployment sets replicas while an HPA scales it")
				}
				if m := r.hpa.Spec.Metrics; len(m) == 0 || m[0].Resource == nil || m[0].Resource.Name != corev1.ResourceCPU {
					t.Errorf("HPA metrics = %+v, want CPU", m)
				}
				if edge.Resources.Requests.Cpu().IsZero() {
					t.Error("an HPA on CPU utilisation needs a CPU request")
				}
			}
			if r.pdb != nil && !selects(r.pdb.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("PDB selects %v", r.pdb.Spec.Selector.MatchLabels)
			}
			if sm := r.serviceMonitor; sm != nil {
				if !selects(sm.Spec.Selector.MatchLabels, admin.Labels) || len(sm.Spec.Endpoints) != 1 ||
					sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" {
					t.Errorf("ServiceMonitor does not scrape the admin Service's /metrics: %+v", sm.Spec)
				}
				if auth := sm.Spec.Endpoints[0].Authorization; (auth != nil) != (cfg.Admin.TokenEnv != "") {
					t.Errorf("ServiceMonitor authorization %+v with admin.token_env %q", auth, cfg.Admin.TokenEnv)
				}
			}
			if r.rule != nil {
				checkRules(t, r.rule)
			}
			if dash := r.configMaps[d.Name+"-dashboard"]; dash != nil {
				if strings.TrimSpace(dash.Data["tradergate.json"]) != strings.TrimSpace(string(Dashboard())) {
					t.Error("the dashboard ConfigMap differs from grafana/tradergate.json")
				}
				if dash.Labels["grafana_dashboard"] == "" {
					t.Errorf("dashboard labels %v lack the sidecar's", dash.Labels)
				}
			}
		})
	}
}

// checkConfig loads the ConfigMap's configuration as the pod does: with
// the keys Secret appended (what the init container runs), the variables
// of the container's env set, and the files it names created where the
// pod mounts them. It must pass tradergate check.
func checkConfig(t *testing.T, r rendered, text string) *config.Config {
	t.Helper()
	pod := r.deployment.Spec.Template.Spec
	edge := container(t, pod.Containers, "tradergate")
	if init := container(t, pod.InitContainers, "config"); !strings.Contains(strings.Join(init.Command, " "), "cat /etc/tradergate/base/config.yaml /etc/tradergate/keys/keys.yaml > /run/tradergate/config.yaml") {
		t.Errorf("the init container does not join the files the test joins: %v", init.Command)
	}
	if !slices.Equal(edge.Args, []string{"-config", "/run/tradergate/config.yaml"}) {
		t.Errorf("edge args = %v", edge.Args)
	}
	if c := container(t, pod.InitContainers, "check"); !slices.Equal(c.Args, []string{"check", "-config", "/run/tradergate/config.yaml"}) || !reflect.DeepEqual(c.Env, edge.Env) {
		t.Errorf("the check init container does not check what the edge loads: %v %v", c.Args, c.Env)
	}
	data := text + ciKeys

	// Every file the configuration names is under a mount of the edge
	// container; the test makes it in a folder of its own at the same
	// path.
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatalf("config.yaml does not parse: %v\n%s", err, text)
	}
	root := t.TempDir()
	files := map[string]string{} // path in the pod -> what it holds
	tls := cfg.Server.TLS
	switch tls.Mode {
	case "files":
		files[tls.CertFile], files[tls.KeyFile] = "cert", "key"
	case "acme":
		if tls.CARootsFile != "" {
			files[tls.CARootsFile] = "cert"
		}
		mountedAt(t, edge, pod, tls.Storage, false)
	}
	if cfg.Redis.CAFile != "" {
		files[cfg.Redis.CAFile] = "cert"
	}
	mountedAt(t, edge, pod, cfg.Cache.SendfileDir, false)
	pair := testkit.SelfSigned(t, "edge", time.Now().Add(24*time.Hour), "edge.example")
	for path, what := range files {
		mountedAt(t, edge, pod, path, true)
		local := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
			t.Fatal(err)
		}
		pem := pair.CertPEM
		if what == "key" {
			pem = pair.KeyPEM
		}
		if err := os.WriteFile(local, pem, 0o600); err != nil {
			t.Fatal(err)
		}
		data = strings.ReplaceAll(data, " "+path+"\n", " "+local+"\n")
	}
	env := map[string]string{}
	for _, e := range edge.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name == "" {
			t.Errorf("env %s does not come from a Secret", e.Name)
		}
		env[e.Name] = "from-secret-" + e.Name
	}
	rep := config.Check([]byte(data), func(k string) string { return env[k] })
	if len(rep.Problems) > 0 {
		var out strings.Builder
		_ = rep.Write(&out, "config.yaml")
		t.Fatalf("the ConfigMap's configuration does not pass tradergate check:\n%s\n%s", out.String(), data)
	}
	for _, v := range rep.Env {
		if !v.Set {
			t.Errorf("%s names %s, which the container does not set", v.Field, v.Name)
		}
	}
	return rep.Config
}

// mountedAt fails unless path lies under a volume mount of c: a Secret's,
// read-only, for a file the edge reads (secret true), or a writable one for
// a folder it writes.
func mountedAt(t *testing.T, c *corev1.Container, pod corev1.PodSpec, path string, secret bool) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") && path != m.MountPath {
			continue
		}
		var vol *corev1.Volume
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == m.Name {
				vol = &pod.Volumes[i]
			}
		}
		switch {
		case vol == nil:
			t.Errorf("mount %s names no volume", m.Name)
		case secret && (vol.Secret == nil || !m.ReadOnly):
			t.Errorf("%s is on volume %s, not a read-only Secret", path, m.Name)
		case !secret && (m.ReadOnly || vol.Secret != nil || vol.ConfigMap != nil):
			t.Errorf("%s is on volume %s, which the edge cannot write", path, m.Name)
		}
		return
	}
	t.Errorf("%s is not under any volume mount of %s: the pod's root filesystem is read-only and holds no such file", path, c.Name)
}

func checkSecurity(t *testing.T, pod corev1.PodSpec) {
	t.Helper()
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("container %s: securityContext %+v, want read-only root, no privilege escalation, every capability dropped", c.Name, sc)
		}
	}
}

// checkRules: the PrometheusRule is prometheus/alerts.yml, group for group
// and rule for rule.
func checkRules(t *testing.T, rule *prometheusRule) {
	t.Helper()
	var file ruleFile
	if err := yaml.UnmarshalStrict(Rules(), &file); err != nil {
		t.Fatalf("prometheus/alerts.yml: %v", err)
	}
	if len(file.Groups) == 0 {
		t.Fatal("prometheus/alerts.yml has no group")
	}
	if !reflect.DeepEqual(rule.Spec, file) {
		t.Errorf("the PrometheusRule differs from prometheus/alerts.yml")
	}
	var got, want []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			got = append(got, r.Expr)
		}
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			want = append(want, r.Expr)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the PrometheusRule's %d expressions differ from the %d of prometheus/alerts.yml", len(got), len(want))
	}
}

func container(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func port(t *testing.T, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.ParseInt(p, 10, 32)
	if err != nil || err2 != nil {
		t.Fatalf("no port in %q", addr)
	}
	return int32(n)
}

func containerPort(t *testing.T, c *corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %s", c.Name, name)
	return 0
}

// targetPort resolves a port by name or number against c's ports.
func targetPort(t *testing.T, c *corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	return containerPort(t, c, p.StrVal)
}

// checkTarget: Service s has a port named name whose target is port want
// of c.
func checkTarget(t *testing.T, s *corev1.Service, name string, c *corev1.Container, want int32) {
	t.Helper()
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			if got := targetPort(t, c, p.TargetPort); got != want {
				t.Errorf("Service %s port %s targets %d, want %d", s.Name, name, got, want)
			}
			return
		}
	}
	t.Errorf("Service %s has no port %s", s.Name, name)
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// startRendered runs the edge on a rendering's configuration (with the
// keys Secret appended, listeners moved to loopback ports and the
// variables of env set) until the test ends, and returns its admin
// address.
func startRendered(t *testing.T, r rendered, env map[string]string) string {
	t.Helper()
	data := r.configMaps[r.deployment.Name].Data["config.yaml"] + ciKeys
	cfg, err := config.Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.Listen, cfg.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cache.SendfileDir = t.TempDir()
	if err := cfg.Validate(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		srv.Close()
	})
	testkit.Eventually(t, "the admin listener is open", func() bool { return srv.AdminAddr() != "" })
	return srv.AdminAddr()
}

// TestHelmProbesAnswer runs the edge on the default values' configuration
// and sends the probes the Deployment declares to its admin listener: a
// probe path the listener does not serve would fail here, not on a
// cluster.
func TestHelmProbesAnswer(t *testing.T) {
	r := render(t, "")
	edge := container(t, r.deployment.Spec.Template.Spec.Containers, "tradergate")
	addr := startRendered(t, r, map[string]string{"TRADERGATE_UPSTREAM_KEY": "upstream-key", "TRADERGATE_ADMIN_TOKEN": "admin-token-of-the-probes-test"})
	client := &http.Client{Timeout: 5 * time.Second}
	for name, probe := range map[string]*corev1.Probe{"readiness": edge.ReadinessProbe, "liveness": edge.LivenessProbe} {
		url := fmt.Sprintf("http://%s%s", addr, probe.HTTPGet.Path)
		testkit.Eventually(t, name+" probe "+url+" answers 200", func() bool {
			resp, err := client.Get(url)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	client.CloseIdleConnections()
}

// TestHelmAdminNeedsToken: the default values give the admin listener a
// token, from a Secret the chart creates and the pod reads, and never
// insecure_open; the edge on that configuration refuses /metrics without
// the token and serves it with it. Without any token the chart refuses to
// render unless insecure_open is asked for.
func TestHelmAdminNeedsToken(t *testing.T) {
	r := render(t, "")
	cm := r.configMaps[r.deployment.Name].Data["config.yaml"]
	cfg, err := config.Parse([]byte(cm + ciKeys))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.InsecureOpen || cfg.Admin.TokenEnv == "" {
		t.Fatalf("default admin section: insecure_open %v, token_env %q; want a token and no opening", cfg.Admin.InsecureOpen, cfg.Admin.TokenEnv)
	}
	edge := container(t, r.deployment.Spec.Template.Spec.Containers, "tradergate")
	var ref *corev1.SecretKeySelector
	for _, e := range edge.Env {
		if e.Name == cfg.Admin.TokenEnv && e.ValueFrom != nil {
			ref = e.ValueFrom.SecretKeyRef
		}
	}
	if ref == nil {
		t.Fatalf("the container's env has no %s from a Secret: %+v", cfg.Admin.TokenEnv, edge.Env)
	}
	secret := r.secrets[ref.Name]
	if secret == nil || len(secret.Data[ref.Key]) < 32 {
		t.Fatalf("the chart renders no Secret %s with a token of 32 or more bytes in %q: %+v", ref.Name, ref.Key, secret)
	}
	token := string(secret.Data[ref.Key])

	addr := startRendered(t, r, map[string]string{"TRADERGATE_UPSTREAM_KEY": "upstream-key", cfg.Admin.TokenEnv: token})
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	get := func(auth string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(""); s != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d, want 401", s)
	}
	if s := get("Bearer not-the-token"); s != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", s)
	}
	if s := get("Bearer " + token); s != http.StatusOK {
		t.Errorf("/metrics with the token: %d, want 200", s)
	}

	if out, err := helmRun(t, "template", "edge", chartDir, "--kube-version", kubeVersion, "--set", "adminToken.create=false"); err == nil || !strings.Contains(string(out), "no token for the admin listener") {
		t.Errorf("no token and no insecure_open rendered (%v):\n%s", err, out)
	}
	open := decodeManifests(t, helm(t, "template", "edge", chartDir, "--kube-version", kubeVersion,
		"--set", "adminToken.create=false", "--set", "config.admin.insecure_open=true"))
	if len(open.secrets) != 0 || !strings.Contains(open.configMaps[open.deployment.Name].Data["config.yaml"], "insecure_open: true") {
		t.Error("asked for insecure_open without a token: want no Secret and insecure_open kept")
	}
}
