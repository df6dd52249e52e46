{{/* Names and labels (the Go tool's chart: <release>-etcd, app.kubernetes.io/name etcd). */}}
{{- define "etcdbr.name" -}}{{ .Release.Name }}-etcd{{- end }}

{{- define "etcdbr.selectorLabels" -}}
app.kubernetes.io/name: etcd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "etcdbr.labels" -}}
{{ include "etcdbr.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: etcdbr
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* An image reference from images.<x> (repository, tag, digest): repository@digest when digest
is set (the tag is then ignored), else repository:tag. A digest must be sha256:<64 hex>. */}}
{{- define "etcdbr.imageRef" -}}
{{- $img := index . 0 -}}
{{- $what := index . 1 -}}
{{- $tag := index . 2 -}}
{{- if $img.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" (toString $img.digest)) -}}
{{- fail (printf "%s.digest %q: use sha256:<64 lower-case hex digits>" $what (toString $img.digest)) -}}
{{- end -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ required (printf "%s.tag (or %s.digest) is required" $what $what) $tag }}
{{- end -}}
{{- end }}

{{/* The etcdbr image (the sidecar). */}}
{{- define "etcdbr.image" -}}
{{ include "etcdbr.imageRef" (list .Values.images.etcdbr "images.etcdbr" (.Values.images.etcdbr.tag | default .Chart.AppVersion)) }}
{{- end }}

{{/* The etcd container's image (and the Local store's init container's): it must have sh, curl
and etcd, which the etcdbr image has not; so no default. */}}
{{- define "etcdbr.etcdImage" -}}
{{- $msg := "images.etcd.repository is required: an image with sh, curl and etcd for the etcd container (it runs the chart's bootstrap script with them), e.g. Gardener's etcd-custom-image; the etcdbr image has none of them" -}}
{{- $_ := required $msg .Values.images.etcd.repository -}}
{{ include "etcdbr.imageRef" (list .Values.images.etcd "images.etcd" .Values.images.etcd.tag) }}
{{- end }}

{{/* Every long-running container's securityContext: non-root, no privilege escalation, no
capabilities, read-only root filesystem (emptyDir volumes for what is written). */}}
{{- define "etcdbr.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop:
  - ALL
{{- end }}

{{/* URL schemes */}}
{{- define "etcdbr.clientScheme" -}}{{ if .Values.tls.etcd }}https{{ else }}http{{ end }}{{- end }}
{{- define "etcdbr.peerScheme" -}}{{ if and .Values.tls.etcd .Values.tls.etcd.peer }}https{{ else }}http{{ end }}{{- end }}
{{- define "etcdbr.serverScheme" -}}{{ if .Values.tls.etcdBackupRestore }}https{{ else }}http{{ end }}{{- end }}

{{/* The provider, checked: a typo fails the render instead of a pod that cannot back up. */}}
{{- define "etcdbr.provider" -}}
{{- $p := .Values.backup.storageProvider | default "" -}}
{{- if not (has $p (list "" "Local" "S3" "ABS" "GCS" "Swift" "OSS" "ECS" "OCS")) -}}
{{- fail (printf "backup.storageProvider %q: use one of Local, S3, ABS, GCS, Swift, OSS, ECS, OCS (case-sensitive) or empty" $p) -}}
{{- end -}}
{{ $p }}
{{- end }}

{{/* Values checks that no template would catch: replicas and TLS pairs. */}}
{{- define "etcdbr.validate" -}}
{{- $r := int .Values.replicas -}}
{{- if or (lt $r 1) (eq (mod $r 2) 0) -}}
{{- fail (printf "replicas %d: use an odd member count (1, 3 or 5)" $r) -}}
{{- end -}}
{{- if .Values.tls.etcd -}}
{{- if not (and .Values.tls.etcd.ca .Values.tls.etcd.server .Values.tls.etcd.client) -}}
{{- fail "tls.etcd needs ca, server (crt, key) and client (crt, key)" -}}
{{- end -}}
{{- if .Values.tls.etcd.peer -}}
{{- if not (and .Values.tls.etcd.peer.ca .Values.tls.etcd.peer.server) -}}
{{- fail "tls.etcd.peer needs ca and server (crt, key)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if .Values.tls.etcdBackupRestore -}}
{{- if not (and .Values.tls.etcdBackupRestore.ca .Values.tls.etcdBackupRestore.server) -}}
{{- fail "tls.etcdBackupRestore needs ca and server (crt, key)" -}}
{{- end -}}
{{- end -}}
{{- if and (eq (include "etcdbr.provider" .) "Local") (gt $r 1) -}}
{{- fail "backup.storageProvider Local (a hostPath) works with replicas 1 only: members on other nodes would not share it" -}}
{{- end -}}
{{- end }}

{{/* The member names (StatefulSet pod names), one per replica. */}}
{{- define "etcdbr.memberNames" -}}
{{- $names := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $names = append $names (printf "%s-%d" (include "etcdbr.name" $) $i) -}}
{{- end -}}
{{ join "," $names }}
{{- end }}

{{- define "etcdbr.leasesEnabled" -}}
{{- if or .Values.backup.leases.snapshotLeaseRenewal .Values.backup.leases.memberLeaseRenewal -}}true{{- end -}}
{{- end }}

{{/* initial-cluster: every member's peer URL (the headless service's per-pod DNS names). */}}
{{- define "etcdbr.initialCluster" -}}
{{- $name := include "etcdbr.name" . -}}
{{- $peerScheme := include "etcdbr.peerScheme" . -}}
{{- $entries := list -}}
{{- range $i := until (int .Values.replicas) -}}
{{- $entries = append $entries (printf "%s-%d=%s://%s-%d.%s-peer.%s.svc:%d" $name $i $peerScheme $name $i $name $.Release.Namespace (int $.Values.servicePorts.etcd.peer)) -}}
{{- end -}}
{{ join "," $entries }}
{{- end }}

{{/* Seconds of EtcdbrBackupRPOHigh's threshold: prometheusRules.rpoThresholdSeconds, or, when 0,
2 x backup.deltaSnapshotPeriod (a Go duration: "60s", "1m30s", "500ms") + 60 s, rounded up. */}}
{{- define "etcdbr.rpoThreshold" -}}
{{- $given := int (.Values.prometheusRules.rpoThresholdSeconds | default 0) -}}
{{- if gt $given 0 -}}
{{ $given }}
{{- else -}}
{{- $d := toString .Values.backup.deltaSnapshotPeriod -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$" $d) -}}
{{- fail (printf "backup.deltaSnapshotPeriod %q: use a duration such as 60s or 1m30s" $d) -}}
{{- end -}}
{{- $secs := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ms|s|m|h)" $d -1 -}}
{{- $n := float64 (regexFind "^[0-9.]+" .) -}}
{{- $u := trimPrefix (regexFind "^[0-9.]+" .) . -}}
{{- $f := get (dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0) $u -}}
{{- $secs = addf $secs (mulf $n $f) -}}
{{- end -}}
{{ addf (mulf 2 $secs) 60 | ceil | int }}
{{- end -}}
{{- end }}
