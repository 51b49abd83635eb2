package e2e

// The example cluster topology (deploy/cluster): a Compose file and
// Kubernetes manifests. No container engine runs here, so the test loads
// their configuration and checks what would break a deployment: each rtcd
// node's environment passes rtcd's own configuration checks (config.Parse,
// as `rtcd serve` runs them), every address in it (NATS, etcd, Redis, the
// node-to-node address it advertises) names a service defined beside it
// that reaches the pods it means on the port they listen on, every node
// shares the store, the master secret and the cluster's name, the stream
// is bootstrapped once by `rtcd init` before the nodes start, and the
// images run the versions the tests run.

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"rtcd/config"
)

const (
	deployCompose    = "deploy/cluster/compose.yaml"
	deployKubernetes = "deploy/cluster/kubernetes/rtcd-cluster.yaml"
	deployDockerfile = "deploy/cluster/Dockerfile"
	// deployMasterKey stands for the operator's secret.
	deployMasterKey = "abababababababababababababababababababababababababababababababab"
)

// deployVersions are the versions the tests run, which the images must
// run too: NATS and etcd from the module files, Redis from Debian's
// package (.ci/run).
func deployVersions(t *testing.T, root string) (nats, etcd string) {
	t.Helper()
	find := func(file, module string) string {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + ` v(\S+)`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s does not require %s", file, module)
		}
		return string(m[1])
	}
	return find("go.mod", "github.com/nats-io/nats-server/v2"), find("tools/go.mod", "go.etcd.io/etcd/server/v3")
}

// deployNode is one rtcd node's configuration as a deployment gives it.
type deployNode struct {
	name string
	cfg  *config.Config
	env  map[string]string
}

// parseNode runs rtcd's configuration checks on env (`rtcd serve`).
func parseNode(t *testing.T, name string, env map[string]string) deployNode {
	t.Helper()
	cfg, err := config.Parse("rtcd serve", nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s: rtcd would refuse its configuration: %v", name, err)
	}
	return deployNode{name: name, cfg: cfg, env: env}
}

// checkNodesAgree: every node of the cluster shares the store, the
// secret, Redis and the cluster; each advertises its own address.
func checkNodesAgree(t *testing.T, nodes []deployNode) {
	t.Helper()
	if len(nodes) != 3 {
		t.Fatalf("%d rtcd nodes, want 3", len(nodes))
	}
	first := nodes[0].cfg
	advertised := map[string]bool{}
	for _, n := range nodes {
		c := n.cfg
		if c.ClusterName == "" || c.Store != "jetstream" || c.RateLimitStore != "redis" {
			t.Fatalf("%s is not a cluster node on JetStream and Redis: %+v", n.name, c)
		}
		if c.ClusterName != first.ClusterName || c.NATSURL != first.NATSURL || c.NATSStream != first.NATSStream ||
			c.RedisURL != first.RedisURL || c.RedisKeyPrefix != first.RedisKeyPrefix || c.ClusterEtcd != first.ClusterEtcd ||
			c.MasterKey != first.MasterKey || c.NATSReplicas != 3 {
			t.Fatalf("%s differs from %s in what the nodes must share", n.name, nodes[0].name)
		}
		// Any node serves any request, so the links a node mails and the
		// pages it sends payers back to must not name the node.
		if c.PublicURL == "" || c.PublicURL != first.PublicURL {
			t.Fatalf("%s has public URL %q, %s %q: every node needs the one public origin", n.name, c.PublicURL, nodes[0].name, first.PublicURL)
		}
		if c.ClusterAdvertise == "" || advertised[c.ClusterAdvertise] {
			t.Fatalf("%s advertises %q: every node needs an address of its own", n.name, c.ClusterAdvertise)
		}
		advertised[c.ClusterAdvertise] = true
		if _, port, _ := net.SplitHostPort(c.ClusterAdvertise); port != portOf(t, c.ClusterListen) {
			t.Fatalf("%s advertises %s but listens on %s", n.name, c.ClusterAdvertise, c.ClusterListen)
		}
	}
}

func portOf(t *testing.T, hostPort string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatalf("%q: %v", hostPort, err)
	}
	return port
}

// hostPorts are the host:port pairs of a comma-separated URL list.
func hostPorts(t *testing.T, urls string) [][2]string {
	t.Helper()
	var out [][2]string
	for _, u := range strings.Split(urls, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil {
			t.Fatalf("%q: %v", u, err)
		}
		out = append(out, [2]string{p.Hostname(), p.Port()})
	}
	return out
}

func loadYAMLDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var docs []map[string]any
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			if err.Error() == "EOF" {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// at walks a decoded YAML tree: keys of maps, indexes of lists.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func strs(v any) []string {
	var out []string
	for _, x := range asList(v) {
		out = append(out, str(x))
	}
	return out
}

func asList(v any) []any { l, _ := v.([]any); return l }

// checkImage: every image pinned, and NATS's and etcd's to the versions
// the tests run.
func checkImage(t *testing.T, who, image, natsVersion, etcdVersion string) {
	t.Helper()
	want := ""
	switch {
	case strings.HasPrefix(image, "nats:"):
		want = natsVersion
	case strings.Contains(image, "etcd"):
		want = etcdVersion
	}
	_, tag, ok := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	if !ok || tag == "" || tag == "latest" {
		t.Fatalf("%s: image %q is not pinned", who, image)
	}
	if want != "" && strings.TrimPrefix(tag, "v") != want {
		t.Fatalf("%s: image %q, want the version the tests run, %s", who, image, want)
	}
}

func TestDeployClusterCompose(t *testing.T) {
	root := binModuleRoot(t)
	natsVersion, etcdVersion := deployVersions(t, root)
	docs := loadYAMLDocs(t, filepath.Join(root, deployCompose))
	if len(docs) != 1 {
		t.Fatalf("%d documents", len(docs))
	}
	services, _ := docs[0]["services"].(map[string]any)
	interpolate := func(name, v string) string {
		// ${RTCD_MASTER_KEY:?…} is the one variable: the operator's secret.
		out := regexp.MustCompile(`\$\{RTCD_MASTER_KEY(:\?[^}]*)?\}`).ReplaceAllString(v, deployMasterKey)
		if strings.Contains(out, "${") {
			t.Fatalf("%s: unexpected variable in %q", name, v)
		}
		return out
	}
	envOf := func(name string) map[string]string {
		env := map[string]string{}
		for k, v := range at(services, name, "environment").(map[string]any) {
			env[k] = interpolate(name, str(v))
		}
		return env
	}
	var nodes []deployNode
	for name, svc := range services {
		image := str(at(svc, "image"))
		checkImage(t, name, image, natsVersion, etcdVersion)
		if name == "rtcd-init" || !strings.HasPrefix(name, "rtcd-") {
			continue
		}
		if cmd := strs(at(svc, "command")); !slices.Equal(cmd, []string{"serve"}) {
			t.Fatalf("%s runs %v, want serve", name, cmd)
		}
		if c := str(at(svc, "depends_on", "rtcd-init", "condition")); c != "service_completed_successfully" {
			t.Fatalf("%s does not wait for rtcd init to complete (%q): nodes would start on a stream nobody bootstrapped", name, c)
		}
		if df := str(at(svc, "build", "dockerfile")); df != deployDockerfile {
			t.Fatalf("%s builds %q, want %s", name, df, deployDockerfile)
		}
		n := parseNode(t, name, envOf(name))
		nodes = append(nodes, n)
		// Its advertised address is its own service name.
		if host, _, _ := net.SplitHostPort(n.cfg.ClusterAdvertise); host != name {
			t.Fatalf("%s advertises %s, not its own service name", name, n.cfg.ClusterAdvertise)
		}
		// What clients reach is published: the API, and the media node on
		// TCP (its socket) and UDP (WebRTC).
		ports := strs(at(svc, "ports"))
		mediaPort := portOf(t, n.cfg.MediaListen)
		for _, want := range []string{":" + portOf(t, n.cfg.Listen), ":" + mediaPort, ":" + mediaPort + "/udp"} {
			if !slices.ContainsFunc(ports, func(p string) bool { return strings.HasSuffix(p, want) }) {
				t.Fatalf("%s does not publish %s: %v", name, want, ports)
			}
		}
		if mu, err := url.Parse(n.cfg.MediaURL); err != nil || !slices.Contains(ports, mu.Port()+":"+mediaPort) {
			t.Fatalf("%s sends clients to %s, which is not its published media port (%v)", name, n.cfg.MediaURL, ports)
		}
	}
	slices.SortFunc(nodes, func(a, b deployNode) int { return strings.Compare(a.name, b.name) })
	checkNodesAgree(t, nodes)
	c := nodes[0].cfg

	// The addresses name the services defined here.
	for _, hp := range hostPorts(t, c.NATSURL) {
		cmd := strings.Join(strs(at(services, hp[0], "command")), " ")
		if !strings.Contains(cmd, "--jetstream") || hp[1] != "4222" {
			t.Fatalf("NATS URL %v: no JetStream server of that name on 4222 (%q)", hp, cmd)
		}
		// Each server routes to the other two.
		for _, other := range hostPorts(t, c.NATSURL) {
			if other[0] != hp[0] && !strings.Contains(cmd, "nats://"+other[0]+":6222") {
				t.Fatalf("%s does not route to %s: %s", hp[0], other[0], cmd)
			}
		}
	}
	for _, ep := range c.EtcdEndpoints() {
		host, port, _ := net.SplitHostPort(ep)
		cmd := strings.Join(strs(at(services, host, "command")), " ")
		if !strings.Contains(cmd, "--advertise-client-urls=http://"+ep) || !strings.Contains(cmd, ":"+port) {
			t.Fatalf("etcd endpoint %s: no etcd service advertising it (%q)", ep, cmd)
		}
	}
	if r := hostPorts(t, c.RedisURL)[0]; !strings.HasPrefix(str(at(services, r[0], "image")), "redis:") || r[1] != "6379" {
		t.Fatalf("Redis URL %s: no redis service of that name", c.RedisURL)
	}

	// rtcd init bootstraps the same stream with the same secret.
	init := envOf("rtcd-init")
	if cmd := strs(at(services, "rtcd-init", "command")); !slices.Equal(cmd, []string{"init"}) {
		t.Fatalf("rtcd-init runs %v", cmd)
	}
	ic := parseNode(t, "rtcd-init", init).cfg
	if ic.NATSURL != c.NATSURL || ic.NATSStream != c.NATSStream || ic.MasterKey != c.MasterKey || ic.Store != c.Store {
		t.Fatal("rtcd-init bootstraps another store or with another secret than the nodes use")
	}
	checkDockerfile(t, root)
}

// checkDockerfile: the image is built from the repository's rtcd command.
func checkDockerfile(t *testing.T, root string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, deployDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go build", "./cmd/rtcd", "ENTRYPOINT"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s has no %q", deployDockerfile, want)
		}
	}
}

// k8sObjects indexes manifests by kind/name.
type k8sObjects map[string]map[string]any

func (o k8sObjects) get(t *testing.T, kind, name string) map[string]any {
	t.Helper()
	obj, ok := o[kind+"/"+name]
	if !ok {
		t.Fatalf("no %s %q in %s", kind, name, deployKubernetes)
	}
	return obj
}

// selects reports whether a Service's selector matches a workload's pod
// labels.
func selects(svc, workload map[string]any) bool {
	sel, _ := at(svc, "spec", "selector").(map[string]any)
	labels, _ := at(workload, "spec", "template", "metadata", "labels").(map[string]any)
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// containerPort is the first container's port of that number or name.
func containerPort(workload map[string]any, port string) (map[string]any, bool) {
	for _, p := range asList(at(workload, "spec", "template", "spec", "containers", 0, "ports")) {
		pm := p.(map[string]any)
		if str(pm["containerPort"]) == port || str(pm["name"]) == port {
			return pm, true
		}
	}
	return nil, false
}

// podEnv resolves a pod template's first container's environment as the
// kubelet would for pod podName: values, $(VAR) references, the pod's
// name from the downward API and the master secret from its Secret.
func podEnv(t *testing.T, workload map[string]any, podName string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range asList(at(workload, "spec", "template", "spec", "containers", 0, "env")) {
		em := e.(map[string]any)
		name := str(em["name"])
		switch {
		case at(em, "valueFrom", "fieldRef", "fieldPath") == "metadata.name":
			env[name] = podName
		case at(em, "valueFrom", "secretKeyRef", "name") == "rtcd-master-key":
			env[name] = deployMasterKey
		case em["value"] != nil:
			env[name] = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(str(em["value"]), func(ref string) string {
				v, ok := env[ref[2:len(ref)-1]]
				if !ok {
					t.Fatalf("%s refers to %s, not defined before it", name, ref)
				}
				return v
			})
		default:
			t.Fatalf("env %s: no value this test understands: %v", name, em)
		}
	}
	return env
}

// checkPodHost: host is <pod>.<service> of a StatefulSet's pod through its
// headless governing Service, or a Service's name, selecting workload and
// exposing port (a port of the workload's pods).
func checkPodHost(t *testing.T, objs k8sObjects, host, port string) {
	t.Helper()
	pod, svcName, isPod := strings.Cut(host, ".")
	if !isPod {
		svc := objs.get(t, "Service", host)
		for _, kind := range []string{"StatefulSet", "Deployment"} {
			for key, w := range objs {
				if strings.HasPrefix(key, kind+"/") && selects(svc, w) {
					if _, ok := containerPort(w, port); ok {
						return
					}
				}
			}
		}
		t.Fatalf("Service %s selects no workload listening on %s", host, port)
	}
	svc := objs.get(t, "Service", svcName)
	if str(at(svc, "spec", "clusterIP")) != "None" {
		t.Fatalf("%s: Service %s is not headless, so %s has no DNS name", host, svcName, pod)
	}
	i := strings.LastIndex(pod, "-")
	ordinal, err := strconv.Atoi(pod[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("%s is not a StatefulSet pod's name", pod)
	}
	sts := objs.get(t, "StatefulSet", pod[:i])
	if str(at(sts, "spec", "serviceName")) != svcName || !selects(svc, sts) {
		t.Fatalf("StatefulSet %s is not governed by Service %s", pod[:i], svcName)
	}
	if replicas, _ := at(sts, "spec", "replicas").(int); ordinal >= replicas {
		t.Fatalf("%s: StatefulSet %s has %d replicas", host, pod[:i], replicas)
	}
	if _, ok := containerPort(sts, port); !ok {
		t.Fatalf("%s: its pods do not listen on %s", host, port)
	}
}

func TestDeployClusterKubernetes(t *testing.T) {
	root := binModuleRoot(t)
	natsVersion, etcdVersion := deployVersions(t, root)
	objs := k8sObjects{}
	for _, d := range loadYAMLDocs(t, filepath.Join(root, deployKubernetes)) {
		objs[str(d["kind"])+"/"+str(at(d, "metadata", "name"))] = d
	}
	for key, w := range objs {
		for _, c := range asList(at(w, "spec", "template", "spec", "containers")) {
			image := str(at(c, "image"))
			checkImage(t, key, image, natsVersion, etcdVersion)
		}
	}
	sts := objs.get(t, "StatefulSet", "rtcd")
	replicas, _ := at(sts, "spec", "replicas").(int)
	if replicas != 3 {
		t.Fatalf("rtcd runs %d replicas, want 3", replicas)
	}
	if args := strs(at(sts, "spec", "template", "spec", "containers", 0, "args")); !slices.Equal(args, []string{"serve"}) {
		t.Fatalf("rtcd runs %v", args)
	}
	var nodes []deployNode
	for i := range replicas {
		pod := fmt.Sprintf("rtcd-%d", i)
		n := parseNode(t, pod, podEnv(t, sts, pod))
		nodes = append(nodes, n)
		host, port, _ := net.SplitHostPort(n.cfg.ClusterAdvertise)
		if !strings.HasPrefix(host, pod+".") {
			t.Fatalf("%s advertises %s, not its own name", pod, n.cfg.ClusterAdvertise)
		}
		checkPodHost(t, objs, host, port)
		mu, err := url.Parse(n.cfg.MediaURL)
		if err != nil {
			t.Fatal(err)
		}
		// A public wss:// name of the pod's own, TLS terminated in front
		// of its media port.
		if mu.Scheme != "wss" || !strings.HasPrefix(mu.Host, pod+".") {
			t.Fatalf("%s sends clients to %s, not a wss:// name of its own", pod, n.cfg.MediaURL)
		}
		if p, ok := containerPort(sts, portOf(t, n.cfg.MediaListen)); !ok || p == nil {
			t.Fatalf("%s: the media port is not declared", pod)
		}
	}
	checkNodesAgree(t, nodes)
	c := nodes[0].cfg
	for _, hp := range hostPorts(t, c.NATSURL) {
		checkPodHost(t, objs, hp[0], hp[1])
	}
	for _, ep := range c.EtcdEndpoints() {
		host, port, _ := net.SplitHostPort(ep)
		checkPodHost(t, objs, host, port)
	}
	r := hostPorts(t, c.RedisURL)[0]
	checkPodHost(t, objs, r[0], r[1])

	// The public Service reaches the API port; the probes ask /healthz on
	// the metrics listener.
	api := objs.get(t, "Service", "rtcd")
	if !selects(api, sts) {
		t.Fatal("Service rtcd does not select the rtcd pods")
	}
	target := str(at(api, "spec", "ports", 0, "targetPort"))
	if p, ok := containerPort(sts, target); !ok || str(p["containerPort"]) != portOf(t, c.Listen) {
		t.Fatalf("Service rtcd targets %q, not the API's port %s", target, portOf(t, c.Listen))
	}
	for _, probe := range []string{"readinessProbe", "livenessProbe"} {
		get := at(sts, "spec", "template", "spec", "containers", 0, probe, "httpGet")
		p, ok := containerPort(sts, str(at(get, "port")))
		if str(at(get, "path")) != "/healthz" || !ok || str(p["containerPort"]) != portOf(t, c.MetricsListen) {
			t.Fatalf("%s: %v, want /healthz on the metrics listener %s", probe, get, c.MetricsListen)
		}
	}
	grace, _ := at(sts, "spec", "template", "spec", "terminationGracePeriodSeconds").(int)
	if grace <= c.ShutdownTimeoutSeconds {
		t.Fatalf("terminationGracePeriodSeconds %d does not outlast the drain (%d s)", grace, c.ShutdownTimeoutSeconds)
	}

	// The Job bootstraps the same stream with the same secret.
	job := objs.get(t, "Job", "rtcd-init")
	if args := strs(at(job, "spec", "template", "spec", "containers", 0, "args")); !slices.Equal(args, []string{"init"}) {
		t.Fatalf("rtcd-init runs %v", args)
	}
	ic := parseNode(t, "rtcd-init", podEnv(t, job, "rtcd-init")).cfg
	if ic.NATSURL != c.NATSURL || ic.NATSStream != c.NATSStream || ic.MasterKey != c.MasterKey || ic.Store != c.Store {
		t.Fatal("rtcd-init bootstraps another store or with another secret than the nodes use")
	}
}
