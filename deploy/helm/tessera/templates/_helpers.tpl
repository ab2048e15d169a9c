{{/*
The chart's name (app.kubernetes.io/name).
*/}}
{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of object names: the release name when it contains the chart's name ("tessera"
gives tessera-scheduler, as deploy/kubernetes/ names it), else RELEASE-CHART. Truncated so that
PREFIX-scheduler-usage still fits 63 characters.
*/}}
{{- define "tessera.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The scheduler's objects (Deployment, Service, ClusterRole, NetworkPolicy) and its Lease.
*/}}
{{- define "tessera.schedulerName" -}}
{{- printf "%s-scheduler" (include "tessera.fullname" .) }}
{{- end }}

{{/*
The leader-election Lease (--lease-name): also the name the Role lets the scheduler renew,
and the stem of its usage ConfigMap (LEASE-usage), so the three cannot drift apart.
*/}}
{{- define "tessera.leaseName" -}}
{{- include "tessera.schedulerName" . }}
{{- end }}

{{- define "tessera.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tessera.schedulerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: the existing ServiceAccount to run as (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tessera.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "tessera.labels" -}}
helm.sh/chart: {{ include "tessera.chart" . }}
{{ include "tessera.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tessera
{{- end }}

{{/*
What the Deployment, Service and NetworkPolicy select the scheduler's pods by.
*/}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{/*
"true" when the replicas elect a leader: leaderElection.enabled true, or "auto" with more than
one replica.
*/}}
{{- define "tessera.leaderElect" -}}
{{- $e := .Values.leaderElection.enabled }}
{{- if kindIs "bool" $e }}
{{- if $e }}true{{ end }}
{{- else if eq (toString $e) "auto" }}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- else }}
{{- fail (printf "leaderElection.enabled: auto, true or false (not %v)" $e) }}
{{- end }}
{{- end }}

{{/*
"true" when the queue tree comes from the ConfigMap (queuesFrom file, and a tree: not {} or "").
*/}}
{{- define "tessera.queuesFile" -}}
{{- if eq .Values.queuesFrom "file" }}
{{- if include "tessera.queuesYaml" . | trim }}true{{ end }}
{{- else if ne .Values.queuesFrom "crd" }}
{{- fail (printf "queuesFrom: file or crd (not %q)" .Values.queuesFrom) }}
{{- end }}
{{- end }}

{{/*
The queue tree file's text: the chart's files/queues.yaml while `queues` is unset, else the
`queues` value, as given when it is a string (comments kept), as YAML when it is a map.
*/}}
{{- define "tessera.queuesYaml" -}}
{{- $q := .Values.queues }}
{{- if kindIs "invalid" $q }}
{{- .Files.Get "files/queues.yaml" }}
{{- else if kindIs "string" $q }}
{{- $q }}
{{- else if $q }}
{{- toYaml $q }}
{{- end }}
{{- end }}

{{- define "tessera.scheme" -}}
{{- if .Values.readApi.tlsSecretName }}https{{ else }}http{{ end }}
{{- end }}

{{/*
The bearer-token Secret (name, key) of the ServiceMonitor's scrape.
*/}}
{{- define "tessera.metricsTokenSecret" -}}
{{- if .Values.serviceMonitor.bearerToken.create }}
{{- printf "%s-metrics-token" (include "tessera.fullname" .) }}
{{- else }}
{{- .Values.serviceMonitor.bearerToken.secretName }}
{{- end }}
{{- end }}

{{/*
`tessera kube`'s arguments, one list item a line (the Deployment's command after "tessera").
*/}}
{{- define "tessera.args" -}}
- kube
{{- range .Values.schedulerNames }}
- --scheduler-name
- {{ . | quote }}
{{- end }}
{{- if include "tessera.queuesFile" . }}
- --queues
- /etc/tessera/queues.yaml
{{- else if eq .Values.queuesFrom "crd" }}
- --queues-from
- crd
{{- end }}
{{- with .Values.topologyLabels }}
- --topology-labels
- {{ join "," . | quote }}
{{- end }}
{{- if include "tessera.leaderElect" . }}
- --leader-elect
{{- end }}
{{- /* Always: the usage ConfigMap lives in the lease namespace, which the Role covers. */}}
- --lease-namespace
- {{ .Release.Namespace | quote }}
- --lease-name
- {{ include "tessera.leaseName" . | quote }}
- --identity
- $(POD_NAME)
- --listen
- {{ printf "0.0.0.0:%v" .Values.readApi.port | quote }}
- --read-auth
- {{ .Values.readApi.auth | quote }}
{{- if .Values.readApi.tlsSecretName }}
- --tls-cert
- /etc/tessera-tls/tls.crt
- --tls-key
- /etc/tessera-tls/tls.key
{{- end }}
- --checkpoint-grace
- {{ .Values.checkpointGrace | toString | quote }}
{{- range .Values.extraArgs }}
- {{ . | toString | quote }}
{{- end }}
{{- end }}
