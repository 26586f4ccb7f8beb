{{/*
The chart's name, or nameOverride.
*/}}
{{- define "nodewright.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's objects: fullnameOverride, else the release name
when it already contains the chart's name, else "<release>-<chart>".
*/}}
{{- define "nodewright.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodewright.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object.
*/}}
{{- define "nodewright.labels" -}}
helm.sh/chart: {{ include "nodewright.chart" . }}
{{ include "nodewright.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Labels that select the controller's pods.
*/}}
{{- define "nodewright.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodewright.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nodewright.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nodewright.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller's image: repository:tag, pinned by digest when one is given.
*/}}
{{- define "nodewright.controller.image" -}}
{{- $tag := default .Chart.AppVersion .Values.controller.image.tag }}
{{- if .Values.controller.image.digest }}
{{- printf "%s:%s@%s" .Values.controller.image.repository $tag .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "nodewright.controller.containerName" -}}
{{- .Values.controller.containerName | default "controller" -}}
{{- end -}}

{{/*
The leader-election Lease's name (the controller's --leader-election-name).
*/}}
{{- define "nodewright.leaseName" -}}
{{- printf "%s-leader-election" (include "nodewright.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Adds a labelSelector matching the controller's pods to ._target when it has none.
*/}}
{{- define "nodewright.patchLabelSelector" -}}
{{- if not (hasKey ._target "labelSelector") }}
{{- $selectorLabels := (include "nodewright.selectorLabels" .) | fromYaml }}
{{- $_ := set ._target "labelSelector" (dict "matchLabels" $selectorLabels) }}
{{- end }}
{{- end }}

{{- define "nodewright.patchPodAffinity" -}}
{{- range $term := (default list ._podAffinity.requiredDuringSchedulingIgnoredDuringExecution) }}
{{- include "nodewright.patchLabelSelector" (merge (dict "_target" $term) $) }}
{{- end }}
{{- range $weighted := (default list ._podAffinity.preferredDuringSchedulingIgnoredDuringExecution) }}
{{- include "nodewright.patchLabelSelector" (merge (dict "_target" $weighted.podAffinityTerm) $) }}
{{- end }}
{{- end }}

{{/*
Pod (anti-)affinity terms and topology spread constraints without a
labelSelector select the controller's own pods, as in Karpenter's chart.
*/}}
{{- define "nodewright.patchAffinity" -}}
{{- with .Values.affinity.podAffinity }}
{{- include "nodewright.patchPodAffinity" (merge (dict "_podAffinity" .) $) }}
{{- end }}
{{- with .Values.affinity.podAntiAffinity }}
{{- include "nodewright.patchPodAffinity" (merge (dict "_podAffinity" .) $) }}
{{- end }}
{{- end }}

{{- define "nodewright.patchTopologySpreadConstraints" -}}
{{- range $constraint := .Values.topologySpreadConstraints }}
{{- include "nodewright.patchLabelSelector" (merge (dict "_target" $constraint) $) }}
{{- end }}
{{- end }}
