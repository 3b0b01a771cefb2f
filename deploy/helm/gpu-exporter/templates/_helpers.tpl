{{/*
The app's name: dcgm-exporter in dcgm mode, so that selectors, Service
and ServiceMonitor names written for dcgm-exporter's chart find ours.
*/}}
{{- define "gpu-exporter.name" -}}
{{- if .Values.dcgm.enabled -}}
dcgm-exporter
{{- else -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Object names: the release name where it holds the app's name (the
static manifests' release is gpu-exporter), else release-name.
*/}}
{{- define "gpu-exporter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "gpu-exporter.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Selector labels: name and instance; dcgm-exporter's component as well
in dcgm mode (its chart selects on all three).
*/}}
{{- define "gpu-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- if .Values.dcgm.enabled }}
app.kubernetes.io/component: dcgm-exporter
{{- end }}
{{- end -}}

{{/* The image: a digest pins it and wins over the tag. */}}
{{- define "gpu-exporter.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The Secret Prometheus scrapes with: its CA and basic auth user. */}}
{{- define "gpu-exporter.scrapeSecret" -}}
{{- .Values.web.scrape.secretName | default (printf "%s-scrape" (include "gpu-exporter.fullname" .)) -}}
{{- end -}}

{{/*
How Prometheus scrapes: https, the certificate's one name and its CA,
and basic auth, as the web config asks. The same for the ServiceMonitor
and the PodMonitor.
*/}}
{{- define "gpu-exporter.scrapeAuth" -}}
{{- if .Values.web.config.tls }}
scheme: https
tlsConfig:
  serverName: {{ .Values.web.scrape.serverName | default (printf "%s.%s.svc" (include "gpu-exporter.fullname" .) .Release.Namespace) }}
  ca:
    secret:
      name: {{ include "gpu-exporter.scrapeSecret" . }}
      key: ca.crt
{{- end }}
{{- if .Values.web.config.basicAuth }}
basicAuth:
  username:
    name: {{ include "gpu-exporter.scrapeSecret" . }}
    key: username
  password:
    name: {{ include "gpu-exporter.scrapeSecret" . }}
    key: password
{{- end }}
{{- end -}}

{{/*
The scrape endpoint, the same in the ServiceMonitor and the PodMonitor.
*/}}
{{- define "gpu-exporter.endpoint" -}}
port: metrics
path: /metrics
interval: {{ .Values.serviceMonitor.interval }}
{{- if .Values.dcgm.enabled }}
# As dcgm-exporter's chart: the workload's namespace, pod and container
# labels become exported_namespace, exported_pod and exported_container,
# the names dashboards written for it read.
honorLabels: false
{{- else }}
scrapeTimeout: {{ .Values.serviceMonitor.scrapeTimeout }}
# The exporter's namespace, pod and container labels (gpu_pod_info,
# and every GPU series under --kubernetes.pod-labels) name the
# workload on the GPU, not this exporter's pod. Without honorLabels
# Prometheus renames them exported_namespace, exported_pod and
# exported_container and writes its target labels in their place.
honorLabels: true
{{- end }}
{{- include "gpu-exporter.scrapeAuth" . }}
{{- with .Values.serviceMonitor.relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The job Prometheus scrapes under, which the rules select: the Service's
name under a ServiceMonitor; under the PodMonitor, its jobLabel's value.
*/}}
{{- define "gpu-exporter.job" -}}
{{- if .Values.podMonitor.enabled -}}
{{ include "gpu-exporter.name" . }}
{{- else -}}
{{ include "gpu-exporter.fullname" . }}
{{- end -}}
{{- end -}}
