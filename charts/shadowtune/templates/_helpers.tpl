{{/*
The chart name, overridable with nameOverride.
*/}}
{{- define "shadowtune.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: the release name when it already
contains the chart name, else "<release>-<chart>"; overridable with
fullnameOverride. Truncated so that "<fullname>-operator" and
"<fullname>-agent-node-scope" stay within 63 characters.
*/}}
{{- define "shadowtune.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
"name-version" for the helm.sh/chart label.
*/}}
{{- define "shadowtune.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "shadowtune.labels" -}}
helm.sh/chart: {{ include "shadowtune.chart" . }}
{{ include "shadowtune.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: shadowtune
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels shared by both components.
*/}}
{{- define "shadowtune.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shadowtune.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Labels and selector labels of the operator.
*/}}
{{- define "shadowtune.operator.labels" -}}
{{ include "shadowtune.labels" . }}
app.kubernetes.io/component: operator
{{- end }}
{{- define "shadowtune.operator.selectorLabels" -}}
{{ include "shadowtune.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
Labels and selector labels of the agent.
*/}}
{{- define "shadowtune.agent.labels" -}}
{{ include "shadowtune.labels" . }}
app.kubernetes.io/component: agent
{{- end }}
{{- define "shadowtune.agent.selectorLabels" -}}
{{ include "shadowtune.selectorLabels" . }}
app.kubernetes.io/component: agent
{{- end }}

{{/*
The operator's ServiceAccount name.
*/}}
{{- define "shadowtune.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.name }}
{{- .Values.operator.serviceAccount.name }}
{{- else if .Values.operator.serviceAccount.create }}
{{- printf "%s-operator" (include "shadowtune.fullname" .) }}
{{- else }}
{{- fail "operator.serviceAccount.name must be set when operator.serviceAccount.create is false" }}
{{- end }}
{{- end }}

{{/*
The agent's ServiceAccount name. The admission policy matches the agent's
requests by "system:serviceaccount:<namespace>:<this name>".
*/}}
{{- define "shadowtune.agent.serviceAccountName" -}}
{{- if .Values.agent.serviceAccount.name }}
{{- .Values.agent.serviceAccount.name }}
{{- else if .Values.agent.serviceAccount.create }}
{{- printf "%s-agent" (include "shadowtune.fullname" .) }}
{{- else }}
{{- fail "agent.serviceAccount.name must be set when agent.serviceAccount.create is false" }}
{{- end }}
{{- end }}

{{/*
The image reference; the tag defaults to the chart's appVersion.
*/}}
{{- define "shadowtune.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
A component's liveness and readiness probes, from its livenessProbe and
readinessProbe values (GETs of /healthz and /readyz on the health port by
default).
*/}}
{{- define "shadowtune.probes" -}}
{{- with .livenessProbe }}
livenessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .readinessProbe }}
readinessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The admission policy's name (cluster-scoped).
*/}}
{{- define "shadowtune.admissionPolicyName" -}}
{{- printf "%s-agent-node-scope" (include "shadowtune.fullname" .) }}
{{- end }}
