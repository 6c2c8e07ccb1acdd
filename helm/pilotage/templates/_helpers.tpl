{{/*
Names and labels shared by every template of the chart, and the pieces the
Deployment and the migration Job both need.
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "pilotage.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, used for every object: fullnameOverride, else the release
name when it already contains the chart's name, else "<release>-<chart>". Kept to 63
characters, the longest DNS label.
*/}}
{{- define "pilotage.fullname" -}}
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

{{/* "name-version" of the chart, for the helm.sh/chart label. */}}
{{- define "pilotage.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels naming this release's pods, whichever their role. */}}
{{- define "pilotage.instanceLabels" -}}
app.kubernetes.io/name: {{ include "pilotage.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels that select the server's pods; they never change across upgrades. */}}
{{- define "pilotage.selectorLabels" -}}
{{ include "pilotage.instanceLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{/* Every object's labels, without the component (the migration Job has its own). */}}
{{- define "pilotage.commonLabels" -}}
helm.sh/chart: {{ include "pilotage.chart" . }}
{{ include "pilotage.instanceLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pilotage
{{- end }}

{{/* The server's objects' labels. */}}
{{- define "pilotage.labels" -}}
{{ include "pilotage.commonLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{/* The server pods' ServiceAccount. */}}
{{- define "pilotage.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pilotage.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "pilotage.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Where the settings file is mounted, and the file itself. */}}
{{- define "pilotage.configDir" -}}/etc/pilotage{{- end }}
{{- define "pilotage.configFile" -}}{{ include "pilotage.configDir" . }}/pilotage.toml{{- end }}

{{/*
The public URL written to the settings: config.publicUrl, else the first Ingress
host (https when a TLS entry lists it), else nothing (the server's default).
*/}}
{{- define "pilotage.publicUrl" -}}
{{- if .Values.config.publicUrl }}
{{- .Values.config.publicUrl }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $host := (first .Values.ingress.hosts).host }}
{{- $scheme := "http" }}
{{- range .Values.ingress.tls }}
{{- if has $host .hosts }}
{{- $scheme = "https" }}
{{- end }}
{{- end }}
{{- printf "%s://%s" $scheme $host }}
{{- end }}
{{- end }}

{{/*
The database URL from its Secret (PILOTAGE_DATABASE_URL), for the server and the
migration Job alike, so both always reach the same database.
*/}}
{{- define "pilotage.databaseUrlEnv" -}}
- name: PILOTAGE_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.secrets.databaseUrl.name | quote }}
      key: {{ .Values.secrets.databaseUrl.key | quote }}
{{- end }}

{{/* The data folder (PILOTAGE_DATA_DIR), where the writable volume is mounted. */}}
{{- define "pilotage.dataDirEnv" -}}
- name: PILOTAGE_DATA_DIR
  value: {{ .Values.volumes.data.mountPath | quote }}
{{- end }}

{{/* The emptyDir volumes behind the read-only root filesystem, and their mounts. */}}
{{- define "pilotage.writableVolumes" -}}
- name: data
  emptyDir:
    sizeLimit: {{ .Values.volumes.data.sizeLimit }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.volumes.tmp.sizeLimit }}
{{- end }}
{{- define "pilotage.writableMounts" -}}
- name: data
  mountPath: {{ .Values.volumes.data.mountPath }}
- name: tmp
  mountPath: /tmp
{{- end }}
