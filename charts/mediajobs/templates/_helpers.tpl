{{/* Names and labels shared by every template. */}}

{{- define "mediajobs.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped prefix; kept short so suffixed names stay within 63 characters. */}}
{{- define "mediajobs.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains (include "mediajobs.name" .) .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "mediajobs.name" .) | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mediajobs.gatewayName" -}}
{{- printf "%s-gateway" (include "mediajobs.fullname" .) -}}
{{- end -}}

{{- define "mediajobs.operatorName" -}}
{{- printf "%s-operator" (include "mediajobs.fullname" .) -}}
{{- end -}}

{{- define "mediajobs.runnerName" -}}
{{- printf "%s-runner" (include "mediajobs.fullname" .) -}}
{{- end -}}

{{- /* Saved destinations' Secrets (DESTINATIONS_NAMESPACE): destinations.namespace, default "<release namespace>-destinations". */}}
{{- define "mediajobs.destinationsNamespace" -}}
{{- .Values.destinations.namespace | default (printf "%s-destinations" .Release.Namespace) -}}
{{- end }}

{{- define "mediajobs.secretName" -}}
{{- default (printf "%s-secrets" (include "mediajobs.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{- define "mediajobs.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "mediajobs.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mediajobs
{{- end -}}

{{/* Selector labels of one component; call with (dict "ctx" $ "component" "gateway"). */}}
{{- define "mediajobs.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mediajobs.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "mediajobs.image" -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}

{{/* Environment both services read: log level, managed storage, user-destination endpoints, and the Secret. */}}
{{- define "mediajobs.commonEnv" -}}
- name: LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: MEDIAJOBS_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: DESTINATIONS_NAMESPACE
  value: {{ include "mediajobs.destinationsNamespace" . | quote }}
- name: MANAGED_STORAGE
  value: s3
{{- with .Values.managedStorage.s3.endpoint }}
- name: MANAGED_S3_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: MANAGED_S3_BUCKET
  value: {{ .Values.managedStorage.s3.bucket | quote }}
- name: MANAGED_S3_REGION
  value: {{ .Values.managedStorage.s3.region | quote }}
- name: MANAGED_S3_FORCE_PATH_STYLE
  value: {{ .Values.managedStorage.s3.forcePathStyle | quote }}
{{- /* Set only when given: an empty value is not a URL, and unset means Google's endpoints. */}}
{{- with .Values.storageEndpoints.gcs.apiEndpoint }}
- name: GCS_API_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.storageEndpoints.gcs.tokenUri }}
- name: GCS_TOKEN_URI
  value: {{ . | quote }}
{{- end }}
{{- with .Values.storageEndpoints.drive.apiEndpoint }}
- name: DRIVE_API_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.storageEndpoints.drive.tokenUri }}
- name: DRIVE_TOKEN_URI
  value: {{ . | quote }}
{{- end }}
{{- /* Batches: the gateway expands POST /jobs shows and playlists, the operator MediaBatch manifests, alike. */}}
{{- with .Values.batches.podcastLookupEndpoint }}
- name: PODCAST_LOOKUP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: MAX_PLAYLIST_SIZE
  value: {{ .Values.batches.maxPlaylistSize | quote }}
- name: OUTBOUND_ALLOW_PRIVATE
  value: {{ .Values.outbound.allowPrivate | default false | quote }}
{{- with .Values.outbound.allowedCidrs }}
- name: OUTBOUND_ALLOWED_CIDRS
  value: {{ join "," . | quote }}
{{- end }}
{{- end -}}
