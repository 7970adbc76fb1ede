{{/* The release's base name: the release name, or release-chart. */}}
{{- define "mcp-extproc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The component of the Pods: sidecar or gateway. */}}
{{- define "mcp-extproc.component" -}}
{{- if eq .Values.mode "sidecar" }}sidecar{{ else if eq .Values.mode "gateway" }}gateway{{ else }}{{ fail (printf "mode must be sidecar or gateway, not %q" .Values.mode) }}{{ end -}}
{{- end -}}

{{- define "mcp-extproc.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ include "mcp-extproc.component" . }}
{{- end -}}

{{- define "mcp-extproc.labels" -}}
{{ include "mcp-extproc.selectorLabels" . }}
app.kubernetes.io/part-of: mcp-extproc
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image reference from (dict "image" IMAGE "default" TAG): tag, else default; a sha256: tag is a digest. */}}
{{- define "mcp-extproc.image" -}}
{{- $tag := .image.tag | default .default | toString -}}
{{- if not $tag }}{{ fail (printf "image %s: no tag" .image.repository) }}{{ end -}}
{{- if hasPrefix "sha256:" $tag -}}
{{ .image.repository }}@{{ $tag }}
{{- else -}}
{{ .image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* The Envoy bootstrap: envoy.bootstrap, or the chart's copy of envoy/envoy.yaml. */}}
{{- define "mcp-extproc.envoyBootstrap" -}}
{{- .Values.envoy.bootstrap | default (.Files.Get "files/envoy.yaml") -}}
{{- end -}}

{{/* The restricted container security context, with overrides. */}}
{{- define "mcp-extproc.securityContext" -}}
{{- toYaml .Values.containerSecurityContext }}
{{- end -}}

{{/* The extproc container, shared by both modes. */}}
{{- define "mcp-extproc.extprocContainer" -}}
- name: extproc
  image: {{ include "mcp-extproc.image" (dict "image" .Values.image.extproc "default" .Chart.AppVersion) }}
  {{- with .Values.image.extproc.pullPolicy }}
  imagePullPolicy: {{ . }}
  {{- end }}
  {{- if eq .Values.mode "sidecar" }}
  restartPolicy: Always
  {{- end }}
  args:
  - --config=/etc/mcp-extproc/config.yaml
  - --log-level={{ .Values.extproc.logLevel }}
  {{- with .Values.extproc.extraArgs }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  ports:
  - name: grpc
    containerPort: 50052
    protocol: TCP
  - name: admin
    containerPort: 9090
    protocol: TCP
  startupProbe:
    grpc:
      port: 50052
    periodSeconds: 1
    failureThreshold: 30
  readinessProbe:
    httpGet:
      path: /readyz
      port: admin
    periodSeconds: 5
  livenessProbe:
    httpGet:
      path: /healthz
      port: admin
    periodSeconds: 10
    failureThreshold: 3
  {{- if eq .Values.mode "gateway" }}
  lifecycle:
    preStop:
      sleep:
        seconds: 10
  {{- end }}
  env:
  - name: GOMEMLIMIT
    valueFrom:
      resourceFieldRef:
        resource: limits.memory
  resources:
    {{- if eq .Values.mode "gateway" }}
    {{- toYaml .Values.gateway.resources | nindent 4 }}
    {{- else }}
    {{- toYaml .Values.extproc.resources | nindent 4 }}
    {{- end }}
  volumeMounts:
  - name: extproc-config
    mountPath: /etc/mcp-extproc
    readOnly: true
  {{- with .Values.attribution.redisPasswordSecret.name }}
  - name: redis-password
    mountPath: /etc/mcp-extproc-redis
    readOnly: true
  {{- end }}
  securityContext:
    {{- include "mcp-extproc.securityContext" . | nindent 4 }}
{{- end -}}

{{/* The Secret holding the Redis password, as a volume, when one is named. */}}
{{- define "mcp-extproc.redisPasswordVolume" -}}
{{- with .Values.attribution.redisPasswordSecret.name }}
- name: redis-password
  secret:
    secretName: {{ . }}
    items:
    - key: {{ $.Values.attribution.redisPasswordSecret.key }}
      path: password
{{- end }}
{{- end -}}

{{/* Pod-level settings shared by both modes. */}}
{{- define "mcp-extproc.podCommon" -}}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
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
{{- if .Values.topologySpread.enabled }}
topologySpreadConstraints:
- maxSkew: {{ .Values.topologySpread.maxSkew }}
  topologyKey: {{ .Values.topologySpread.topologyKey }}
  whenUnsatisfiable: {{ .Values.topologySpread.whenUnsatisfiable }}
  labelSelector:
    matchLabels:
      {{- include "mcp-extproc.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}

{{/* Pod template annotations: a change of either config rolls the Pods. */}}
{{- define "mcp-extproc.podAnnotations" -}}
checksum/extproc-config: {{ .Values.config | sha256sum }}
{{- if eq .Values.mode "sidecar" }}
checksum/envoy-config: {{ include "mcp-extproc.envoyBootstrap" . | sha256sum }}
{{- end }}
{{- if eq .Values.mode "gateway" }}
# Plain gRPC from the gateway (see the EnvoyFilter).
sidecar.istio.io/inject: "false"
{{- end }}
prometheus.io/scrape: "true"
prometheus.io/port: "9090"
prometheus.io/path: /metrics
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end -}}
