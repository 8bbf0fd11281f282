{{/* Names, labels, and the settings derived from values. */}}

{{- define "durable-kafka.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "durable-kafka.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "durable-kafka.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "durable-kafka.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "durable-kafka.selectorLabels" -}}
app.kubernetes.io/name: {{ include "durable-kafka.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "durable-kafka.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "durable-kafka.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "durable-kafka.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "durable-kafka.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding client.properties, or "" for a plaintext client. */}}
{{- define "durable-kafka.clientPropertiesSecret" -}}
{{- with .Values.kafka.clientProperties -}}
{{- if .existingSecret -}}{{ .existingSecret }}
{{- else if .properties -}}{{ include "durable-kafka.fullname" $ }}-kafka-client
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "durable-kafka.tlsSecret" -}}
{{- default (printf "%s-tls" (include "durable-kafka.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "durable-kafka.tokensSecret" -}}
{{- default (printf "%s-tokens" (include "durable-kafka.fullname" .)) .Values.auth.static.existingSecret -}}
{{- end -}}

{{/*
The names a request's `Host` may carry besides the pod's own (`allowed_hosts`): every name
of the Service (short, with its namespace, `.svc` and the cluster domain), the Ingress
host, and `allowedHosts`.
*/}}
{{- define "durable-kafka.allowedHosts" -}}
{{- $svc := include "durable-kafka.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- if and .Values.ingress.enabled .Values.ingress.host -}}
{{- $hosts = append $hosts .Values.ingress.host -}}
{{- end -}}
{{- join "," (concat $hosts .Values.allowedHosts) -}}
{{- end -}}

{{/*
The existing Secrets the pods mount or read, each with a digest of its content: what
`lookup` finds in the cluster at install and upgrade (nothing under `helm template`). Hashed
into the pod template, so naming another Secret rolls the pods, and so does a `helm upgrade`
after one's content changed. Helm cannot see a change made between upgrades (cert-manager
renewing a certificate): that needs a reloader, or a `kubectl rollout restart`.
*/}}
{{- define "durable-kafka.existingSecrets" -}}
{{- $names := list -}}
{{- with .Values.kafka.clientProperties.existingSecret -}}{{- $names = append $names . -}}{{- end -}}
{{- range .Values.kafka.secretMounts -}}{{- $names = append $names .secretName -}}{{- end -}}
{{- if .Values.tls.enabled -}}
{{- with .Values.tls.existingSecret -}}{{- $names = append $names . -}}{{- end -}}
{{- with .Values.tls.clientCA.existingSecret -}}{{- $names = append $names . -}}{{- end -}}
{{- end -}}
{{- if eq .Values.auth.mode "static" -}}
{{- with .Values.auth.static.existingSecret -}}{{- $names = append $names . -}}{{- end -}}
{{- end -}}
{{- if eq .Values.coldTier.backend "s3" -}}
{{- with .Values.coldTier.s3.existingSecret -}}{{- $names = append $names . -}}{{- end -}}
{{- end -}}
{{- range $name := $names | uniq }}
{{ $name }}: {{ (lookup "v1" "Secret" $.Release.Namespace $name).data | default dict | toJson | sha256sum }}
{{- end -}}
{{- end -}}

{{/* The TLS Secret's key of the CA pods verify each other against, or "" (see values). */}}
{{- define "durable-kafka.peerCAKey" -}}
{{- if and .Values.tls.enabled .Values.tls.peerCAKey (or .Values.tls.existingSecret .Values.tls.ca) -}}
{{- .Values.tls.peerCAKey -}}
{{- end -}}
{{- end -}}

{{/* https when the API is served over TLS. */}}
{{- define "durable-kafka.scheme" -}}
{{- if .Values.tls.enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}

{{/* Seconds, rounded up, of a setting in milliseconds. */}}
{{- define "durable-kafka.seconds" -}}
{{- div (add (int .) 999) 1000 -}}
{{- end -}}

{{/*
The longest a stop takes: the preStop sleep, then `drain_timeout_ms` for requests in flight,
then the write slots handed over and every Kafka client closed, which `serve --workers`
bounds by 3 x `kafka_timeout_ms`; 5 s to spare.
*/}}
{{- define "durable-kafka.stopSeconds" -}}
{{- $drain := include "durable-kafka.seconds" .Values.server.drainTimeoutMs | int -}}
{{- $kafka := include "durable-kafka.seconds" .Values.kafka.timeoutMs | int -}}
{{- add (int .Values.preStopSleepSeconds) $drain (mul 3 $kafka) 5 -}}
{{- end -}}

{{- define "durable-kafka.terminationGracePeriodSeconds" -}}
{{- $needed := include "durable-kafka.stopSeconds" . | int -}}
{{- $given := .Values.terminationGracePeriodSeconds -}}
{{- if kindIs "invalid" $given -}}
{{- $needed -}}
{{- else if lt (int $given) $needed -}}
{{- fail (printf "terminationGracePeriodSeconds %d is shorter than a stop can take (%d s: preStop + drain + 3 x kafka timeout + 5)" (int $given) $needed) -}}
{{- else -}}
{{- int $given -}}
{{- end -}}
{{- end -}}

{{/* Values that cannot work, refused at render time rather than at the pod's start. */}}
{{- define "durable-kafka.validate" -}}
{{- $mode := .Values.auth.mode -}}
{{- if not (has $mode (list "static" "jwt" "off")) -}}
{{- fail "auth.mode must be static, jwt or off" -}}
{{- end -}}
{{- if and (eq $mode "off") (not .Values.auth.offBeyondLoopback) -}}
{{- fail "auth.mode off serves the API unauthenticated: set auth.offBeyondLoopback=true only if a proxy in front authenticates every request" -}}
{{- end -}}
{{- if and (eq $mode "jwt") (not (and .Values.auth.jwt.issuer .Values.auth.jwt.audience .Values.auth.jwt.jwksUrl)) -}}
{{- fail "auth.mode jwt needs auth.jwt.issuer, auth.jwt.audience and auth.jwt.jwksUrl" -}}
{{- end -}}
{{- if not (has .Values.kafka.topicManagement (list "auto" "external")) -}}
{{- fail "kafka.topicManagement must be auto or external" -}}
{{- end -}}
{{- if and (eq .Values.coldTier.backend "fs") (not .Values.coldTier.fs.claimName) -}}
{{- fail "coldTier.backend fs needs coldTier.fs.claimName (a ReadWriteMany claim every pod shares): a pod's own disk would lose the data tiered out of Kafka" -}}
{{- end -}}
{{- if not (has .Values.coldTier.backend (list "s3" "fs")) -}}
{{- fail "coldTier.backend must be s3 or fs" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) (not (and .Values.tls.cert .Values.tls.key)) -}}
{{- fail "tls.enabled needs tls.existingSecret, or tls.cert and tls.key" -}}
{{- end -}}
{{- if lt (int .Values.workers) 1 -}}
{{- fail "workers must be >= 1 (a pod's CPU limit, not its node's cores, is what it may use)" -}}
{{- end -}}
{{- end -}}

{{/*
The ops port's name of worker N (`workers`): `ops` for worker 0 (the probes ask it), `ops-wN`
for the others, each listening on the ops port + N.
*/}}
{{- define "durable-kafka.opsPortName" -}}
{{- if eq (int .) 0 }}ops{{ else }}ops-w{{ . }}{{ end -}}
{{- end -}}
