{{/* Hand-written helpers of the generated templates (see src/packaging/chart.rs). */}}

{{- define "capmox-rs.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "capmox-rs.credentialsSecret" -}}
{{ .Values.credentials.existingSecret | default "capmox-manager-credentials" }}
{{- end }}

{{- define "capmox-rs.webhookSecret" -}}
{{- if .Values.webhooks.certManager.enabled -}}
webhook-server-cert
{{- else -}}
{{ required "webhooks.certificate.secretName: the webhook certificate Secret (without cert-manager)" .Values.webhooks.certificate.secretName }}
{{- end }}
{{- end }}

{{/* cert-manager's CA injection annotation, when cert-manager issues the certificate. */}}
{{- define "capmox-rs.caInjection" -}}
{{- if .Values.webhooks.certManager.enabled -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/capmox-serving-cert
{{- end }}
{{- end }}

{{- define "capmox-rs.crdAnnotations" -}}
{{- include "capmox-rs.caInjection" . }}
{{- if .Values.crds.keep }}
helm.sh/resource-policy: keep
{{- end }}
{{- end }}

{{/* The provided CA of the webhooks, without cert-manager. */}}
{{- define "capmox-rs.caBundle" -}}
{{- if not .Values.webhooks.certManager.enabled -}}
caBundle: {{ required "webhooks.certificate.caBundle: the CA of the webhook certificate (without cert-manager)" .Values.webhooks.certificate.caBundle }}
{{- end }}
{{- end }}

{{/* The manager's arguments: the components' defaults, then what the values add. */}}
{{- define "capmox-rs.args" -}}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
{{- end }}
- --feature-gates=ClusterTopology={{ .Values.featureGates.clusterTopology }}
- --diagnostics-address=:{{ .Values.metrics.port }}
- --insecure-diagnostics={{ not .Values.metrics.secure }}
- --v={{ .Values.logLevel }}
{{- with .Values.watchFilter }}
- --watch-filter={{ . }}
{{- end }}
{{- with .Values.watchNamespaces }}
- --namespace={{ join "," . }}
{{- end }}
{{- with .Values.syncPeriod }}
- --sync-period={{ . }}
{{- end }}
{{- with .Values.concurrency }}
- --concurrency={{ . }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Scheduling and pull secrets of the manager pod. */}}
{{- define "capmox-rs.podExtras" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
