// k8svalidate checks Kubernetes manifests (the output of `helm template`) against the Kubernetes
// API types of k8s.io/api: every YAML document is decoded strictly into the Go type of its
// apiVersion/kind (an unknown or misspelt field, a wrong value type or a duplicate key is an
// error; an unknown apiVersion/kind is an error), then checked for what the API server would
// refuse or what would leave the release broken: object and container names, images, the
// StatefulSet selector matching its pod template labels, volume mounts naming a volume,
// probes' named ports, Services selecting a rendered pod template, and references to Secrets,
// ConfigMaps, ServiceAccounts and Roles that the same manifest set must contain.
//
// Usage: k8svalidate FILE... ("-" = stdin). Prints one line per document and "ok: N documents",
// or every problem found and exits 1. Exit 2 on usage or read errors.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// PrometheusRule (prometheus-operator's monitoring.coreos.com/v1; not in k8s.io/api): the
// fields of its CRD schema that rule files use.
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Groups []RuleGroup `json:"groups"`
	} `json:"spec"`
}

type RuleGroup struct {
	Name                    string            `json:"name"`
	Interval                string            `json:"interval,omitempty"`
	QueryOffset             string            `json:"query_offset,omitempty"`
	Limit                   *int              `json:"limit,omitempty"`
	PartialResponseStrategy string            `json:"partial_response_strategy,omitempty"`
	Labels                  map[string]string `json:"labels,omitempty"`
	Rules                   []Rule            `json:"rules"`
}

type Rule struct {
	Record        string              `json:"record,omitempty"`
	Alert         string              `json:"alert,omitempty"`
	Expr          *intstr.IntOrString `json:"expr"`
	For           string              `json:"for,omitempty"`
	KeepFiringFor string              `json:"keep_firing_for,omitempty"`
	Labels        map[string]string   `json:"labels,omitempty"`
	Annotations   map[string]string   `json:"annotations,omitempty"`
}

// object is what the cross-document checks need of every decoded document.
type object struct {
	where     string // file and document number
	kind      string
	name      string
	namespace string
	obj       any
}

// newObject returns a pointer to the Go type of apiVersion/kind, or nil when unknown.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "coordination.k8s.io/v1 Lease":
		return &coordinationv1.Lease{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &PrometheusRule{}
	}
	return nil
}

type checker struct {
	problems  []string
	objs      []object
	refs      []ref               // references to resolve among objs
	selectors []selectorRef       // Service and PDB selectors: each must select a template
	templates []map[string]string // pod template labels of the workloads
}

func (c *checker) errorf(where, format string, args ...any) {
	c.problems = append(c.problems, where+": "+fmt.Sprintf(format, args...))
}

// splitDocuments splits a YAML stream on "---" lines; documents with nothing but comments and
// blank lines are dropped (helm renders those for disabled templates).
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		meaningful := false
		sc := bufio.NewScanner(bytes.NewReader(cur.Bytes()))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			t := strings.TrimSpace(sc.Text())
			if t != "" && !strings.HasPrefix(t, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.TrimRight(line, " \t\r\n") == "---" || strings.HasPrefix(line, "--- ") {
			flush()
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return docs
}

func (c *checker) checkMeta(where string, m *metav1.ObjectMeta, kind string) {
	if m.Name == "" {
		c.errorf(where, "%s without metadata.name", kind)
	} else {
		var errs []string
		switch kind {
		case "Service":
			errs = validation.IsDNS1035Label(m.Name)
		default:
			errs = validation.IsDNS1123Subdomain(m.Name)
		}
		for _, e := range errs {
			c.errorf(where, "%s name %q: %s", kind, m.Name, e)
		}
	}
	if m.Namespace != "" {
		for _, e := range validation.IsDNS1123Label(m.Namespace) {
			c.errorf(where, "namespace %q: %s", m.Namespace, e)
		}
	}
	c.checkLabels(where, "metadata.labels", m.Labels)
	for k := range m.Annotations {
		for _, e := range validation.IsQualifiedName(strings.ToLower(k)) {
			c.errorf(where, "annotation key %q: %s", k, e)
		}
	}
}

func (c *checker) checkLabels(where, what string, l map[string]string) {
	for k, v := range l {
		for _, e := range validation.IsQualifiedName(k) {
			c.errorf(where, "%s key %q: %s", what, k, e)
		}
		for _, e := range validation.IsValidLabelValue(v) {
			c.errorf(where, "%s %s=%q: %s", what, k, v, e)
		}
	}
}

func (c *checker) checkPodSpec(where string, spec *corev1.PodSpec, claimNames map[string]bool) {
	volumes := map[string]bool{}
	for n := range claimNames {
		volumes[n] = true
	}
	for _, v := range spec.Volumes {
		for _, e := range validation.IsDNS1123Label(v.Name) {
			c.errorf(where, "volume %q: %s", v.Name, e)
		}
		if volumes[v.Name] {
			c.errorf(where, "volume %q defined twice", v.Name)
		}
		volumes[v.Name] = true
	}
	if len(spec.Containers) == 0 {
		c.errorf(where, "pod template without containers")
	}
	names := map[string]bool{}
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, ct := range all {
		cw := fmt.Sprintf("%s: container %q", where, ct.Name)
		if ct.Name == "" {
			c.errorf(where, "container without a name")
		}
		for _, e := range validation.IsDNS1123Label(ct.Name) {
			c.errorf(cw, "name: %s", e)
		}
		if names[ct.Name] {
			c.errorf(cw, "container name used twice")
		}
		names[ct.Name] = true
		if strings.TrimSpace(ct.Image) == "" || strings.ContainsAny(ct.Image, " \t") || strings.HasSuffix(ct.Image, ":") {
			c.errorf(cw, "image %q is empty or malformed", ct.Image)
		}
		ports := map[string]bool{}
		for _, p := range ct.Ports {
			if p.ContainerPort < 1 || p.ContainerPort > 65535 {
				c.errorf(cw, "containerPort %d out of range", p.ContainerPort)
			}
			if p.Name != "" {
				for _, e := range validation.IsValidPortName(p.Name) {
					c.errorf(cw, "port name %q: %s", p.Name, e)
				}
				ports[p.Name] = true
			}
		}
		for _, pr := range []*corev1.Probe{ct.ReadinessProbe, ct.LivenessProbe, ct.StartupProbe} {
			if pr == nil {
				continue
			}
			if pr.HTTPGet != nil {
				port := pr.HTTPGet.Port
				if port.Type == intstr.String && !ports[port.StrVal] {
					c.errorf(cw, "probe port %q is not a port of the container", port.StrVal)
				}
				if port.Type == intstr.Int && (port.IntVal < 1 || port.IntVal > 65535) {
					c.errorf(cw, "probe port %d out of range", port.IntVal)
				}
				if !strings.HasPrefix(pr.HTTPGet.Path, "/") {
					c.errorf(cw, "probe path %q does not start with /", pr.HTTPGet.Path)
				}
				if s := pr.HTTPGet.Scheme; s != "" && s != corev1.URISchemeHTTP && s != corev1.URISchemeHTTPS {
					c.errorf(cw, "probe scheme %q is not HTTP or HTTPS", s)
				}
			}
		}
		for _, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.errorf(cw, "volumeMount %q names no volume", m.Name)
			}
			if !strings.HasPrefix(m.MountPath, "/") {
				c.errorf(cw, "mountPath %q is not absolute", m.MountPath)
			}
		}
		envs := map[string]bool{}
		for _, e := range ct.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				c.errorf(cw, "env %q: %s", e.Name, msg)
			}
			if envs[e.Name] {
				c.errorf(cw, "env %q set twice", e.Name)
			}
			envs[e.Name] = true
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				r := e.ValueFrom.SecretKeyRef
				optional := r.Optional != nil && *r.Optional
				c.refs = append(c.refs, ref{where: cw, kind: "Secret", name: r.Name, key: r.Key, optional: optional})
			}
		}
		if len(ct.Command) == 0 && len(ct.Args) == 0 {
			// the image's entry point: fine, but every container here names what it runs
			c.errorf(cw, "neither command nor args")
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			c.refs = append(c.refs, ref{where: where, kind: "Secret", name: v.Secret.SecretName})
		}
		if v.ConfigMap != nil {
			for _, it := range v.ConfigMap.Items {
				c.refs = append(c.refs, ref{where: where, kind: "ConfigMap", name: v.ConfigMap.Name, key: it.Key})
			}
			if len(v.ConfigMap.Items) == 0 {
				c.refs = append(c.refs, ref{where: where, kind: "ConfigMap", name: v.ConfigMap.Name})
			}
		}
	}
	if spec.ServiceAccountName != "" {
		c.refs = append(c.refs, ref{where: where, kind: "ServiceAccount", name: spec.ServiceAccountName})
	}
}

type ref struct {
	where    string
	kind     string
	name     string
	key      string
	optional bool
}

func (c *checker) document(where string, doc []byte) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		c.errorf(where, "not YAML: %v", err)
		return
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		c.errorf(where, "apiVersion or kind missing")
		return
	}
	obj := newObject(tm.APIVersion, tm.Kind)
	if obj == nil {
		c.errorf(where, "unknown apiVersion/kind %s %s", tm.APIVersion, tm.Kind)
		return
	}
	// strict, as the API server decodes what kubectl sends: YAML to JSON without the target
	// type's hints (a number stays a number where a string is due), duplicate keys and unknown
	// fields are errors
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		c.errorf(where, "%s %s: %v", tm.APIVersion, tm.Kind, err)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		c.errorf(where, "%s %s: %v", tm.APIVersion, tm.Kind, err)
		return
	}
	var meta *metav1.ObjectMeta
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		meta = &o.ObjectMeta
		for k := range o.Data {
			for _, e := range validation.IsConfigMapKey(k) {
				c.errorf(where, "ConfigMap key %q: %s", k, e)
			}
		}
	case *corev1.Secret:
		meta = &o.ObjectMeta
		for k := range o.Data {
			for _, e := range validation.IsConfigMapKey(k) {
				c.errorf(where, "Secret key %q: %s", k, e)
			}
		}
		if o.Type == corev1.SecretTypeTLS && (len(o.Data[corev1.TLSCertKey]) == 0 || len(o.Data[corev1.TLSPrivateKeyKey]) == 0) {
			c.errorf(where, "kubernetes.io/tls Secret without tls.crt or tls.key")
		}
	case *corev1.Service:
		meta = &o.ObjectMeta
		if len(o.Spec.Selector) == 0 {
			c.errorf(where, "Service without a selector")
		}
		c.checkLabels(where, "spec.selector", o.Spec.Selector)
		for _, p := range o.Spec.Ports {
			if p.Port < 1 || p.Port > 65535 {
				c.errorf(where, "Service port %d out of range", p.Port)
			}
			if len(o.Spec.Ports) > 1 && p.Name == "" {
				c.errorf(where, "Service with several ports has an unnamed port")
			}
		}
	case *corev1.ServiceAccount:
		meta = &o.ObjectMeta
	case *corev1.PersistentVolumeClaim:
		meta = &o.ObjectMeta
	case *appsv1.StatefulSet:
		meta = &o.ObjectMeta
		c.checkWorkload(where, o.Spec.Selector, &o.Spec.Template, o.Spec.VolumeClaimTemplates)
		if o.Spec.ServiceName == "" {
			c.errorf(where, "StatefulSet without serviceName")
		} else {
			c.refs = append(c.refs, ref{where: where, kind: "Service", name: o.Spec.ServiceName})
		}
	case *appsv1.Deployment:
		meta = &o.ObjectMeta
		c.checkWorkload(where, o.Spec.Selector, &o.Spec.Template, nil)
	case *rbacv1.Role:
		meta = &o.ObjectMeta
		for _, r := range o.Rules {
			if len(r.Verbs) == 0 || len(r.Resources) == 0 {
				c.errorf(where, "Role rule without verbs or resources")
			}
		}
	case *rbacv1.RoleBinding:
		meta = &o.ObjectMeta
		if o.RoleRef.Kind == "Role" {
			c.refs = append(c.refs, ref{where: where, kind: "Role", name: o.RoleRef.Name})
		}
		for _, s := range o.Subjects {
			if s.Kind == "ServiceAccount" {
				c.refs = append(c.refs, ref{where: where, kind: "ServiceAccount", name: s.Name})
			}
		}
	case *policyv1.PodDisruptionBudget:
		meta = &o.ObjectMeta
		if o.Spec.Selector == nil {
			c.errorf(where, "PodDisruptionBudget without a selector")
		} else {
			c.selectors = append(c.selectors, selectorRef{where: where, what: "PodDisruptionBudget", sel: o.Spec.Selector.MatchLabels})
		}
	case *coordinationv1.Lease:
		meta = &o.ObjectMeta
	case *PrometheusRule:
		meta = &o.ObjectMeta
		if len(o.Spec.Groups) == 0 {
			c.errorf(where, "PrometheusRule without groups")
		}
		for _, g := range o.Spec.Groups {
			if g.Name == "" {
				c.errorf(where, "rule group without a name")
			}
			for i, r := range g.Rules {
				if (r.Alert == "") == (r.Record == "") {
					c.errorf(where, "group %q rule %d: exactly one of alert and record", g.Name, i)
				}
				if r.Expr == nil || strings.TrimSpace(r.Expr.String()) == "" {
					c.errorf(where, "group %q rule %d: empty expr", g.Name, i)
				}
			}
		}
	}
	c.checkMeta(where, meta, tm.Kind)
	c.objs = append(c.objs, object{where: where, kind: tm.Kind, name: meta.Name, namespace: meta.Namespace, obj: obj})
	fmt.Printf("%s: %s %s/%s\n", where, tm.APIVersion, tm.Kind, meta.Name)
}

type selectorRef struct {
	where string
	what  string
	sel   map[string]string
}

func (c *checker) checkWorkload(where string, sel *metav1.LabelSelector, tpl *corev1.PodTemplateSpec, claims []corev1.PersistentVolumeClaim) {
	if sel == nil {
		c.errorf(where, "workload without spec.selector")
	} else {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			c.errorf(where, "spec.selector: %v", err)
		} else if s.Empty() || !s.Matches(labels.Set(tpl.Labels)) {
			c.errorf(where, "spec.selector %s does not match the pod template labels %v", s, tpl.Labels)
		}
	}
	c.checkLabels(where, "template labels", tpl.Labels)
	c.templates = append(c.templates, tpl.Labels)
	claimNames := map[string]bool{}
	for _, pvc := range claims {
		if pvc.Name == "" {
			c.errorf(where, "volumeClaimTemplate without a name")
		}
		if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
			c.errorf(where, "volumeClaimTemplate %q without a storage request", pvc.Name)
		}
		claimNames[pvc.Name] = true
	}
	c.checkPodSpec(where, &tpl.Spec, claimNames)
}

// crossCheck: references resolve within the manifest set; Services and PDBs select a pod template.
func (c *checker) crossCheck() {
	have := map[string]object{}
	for _, o := range c.objs {
		k := o.kind + "/" + o.name
		if prev, dup := have[k]; dup {
			c.errorf(o.where, "%s also rendered at %s", k, prev.where)
		}
		have[k] = o
	}
	for _, r := range c.refs {
		o, ok := have[r.kind+"/"+r.name]
		if !ok {
			if !r.optional {
				c.errorf(r.where, "refers to %s %q, which is not in the manifests", r.kind, r.name)
			}
			continue
		}
		if r.key == "" {
			continue
		}
		found := false
		switch x := o.obj.(type) {
		case *corev1.Secret:
			_, found = x.Data[r.key]
			if !found {
				_, found = x.StringData[r.key]
			}
		case *corev1.ConfigMap:
			_, found = x.Data[r.key]
		}
		if !found && !r.optional {
			c.errorf(r.where, "refers to key %q of %s %q, which it does not have", r.key, r.kind, r.name)
		}
	}
	for _, o := range c.objs {
		if svc, ok := o.obj.(*corev1.Service); ok && len(svc.Spec.Selector) > 0 {
			c.selectors = append(c.selectors, selectorRef{where: o.where, what: "Service", sel: svc.Spec.Selector})
		}
	}
	for _, s := range c.selectors {
		matched := false
		for _, t := range c.templates {
			if labels.SelectorFromSet(s.sel).Matches(labels.Set(t)) {
				matched = true
			}
		}
		if !matched {
			c.errorf(s.where, "%s selector %v selects no rendered pod template", s.what, s.sel)
		}
	}
}

var docSep = regexp.MustCompile(`^# Source: `)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k8svalidate FILE... (- = stdin)")
		os.Exit(2)
	}
	c := &checker{}
	n := 0
	for _, f := range os.Args[1:] {
		var data []byte
		var err error
		if f == "-" {
			data, err = io.ReadAll(os.Stdin)
		} else {
			data, err = os.ReadFile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "k8svalidate:", err)
			os.Exit(2)
		}
		for i, doc := range splitDocuments(data) {
			where := fmt.Sprintf("%s#%d", f, i+1)
			// helm's "# Source: chart/templates/x.yaml" line names the template
			for _, line := range strings.Split(string(doc), "\n") {
				if docSep.MatchString(line) {
					where += " (" + strings.TrimPrefix(line, "# Source: ") + ")"
					break
				}
			}
			c.document(where, doc)
			n++
		}
	}
	if n == 0 {
		c.problems = append(c.problems, "no documents")
	}
	c.crossCheck()
	if len(c.problems) > 0 {
		for _, p := range c.problems {
			fmt.Fprintln(os.Stderr, "invalid:", p)
		}
		os.Exit(1)
	}
	fmt.Printf("ok: %d documents\n", n)
}
