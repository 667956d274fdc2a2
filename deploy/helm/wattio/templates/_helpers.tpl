{{/* The labels every object carries. */}}
{{- define "wattio.labels" -}}
app.kubernetes.io/name: wattio
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels that select the exporter pods. */}}
{{- define "wattio.selector" -}}
app.kubernetes.io/name: wattio
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* http or https: whether the web config turns TLS on is the operator's to say. */}}
{{- define "wattio.scheme" -}}
{{- if and .Values.exporter.webConfigSecret .Values.exporter.tls }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{/* Non-empty when the exporter names pods through the API server (--by pod or container). */}}
{{- define "wattio.watchesPods" -}}
{{- if has .Values.exporter.by (list "pod" "container") }}yes{{ end }}
{{- end }}
