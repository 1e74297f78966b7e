{{/* Names and labels. */}}
{{- define "tradergate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tradergate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tradergate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tradergate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tradergate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "tradergate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "tradergate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tradergate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
tradergate.port is the port of a host:port listen address, as a number;
it fails on an address without one.
*/}}
{{- define "tradergate.port" -}}
{{- $port := regexFind "[0-9]+$" (toString .) -}}
{{- if not $port -}}
{{- fail (printf "listen address %q has no port" (toString .)) -}}
{{- end -}}
{{- $port -}}
{{- end -}}

{{/*
tradergate.config is the configuration file the ConfigMap holds: the
config values with the fields the chart owns filled in (redis from the
redis values, the shutdown timings from shutdown), and without keys, which
the init container appends from their Secret.
*/}}
{{- define "tradergate.config" -}}
{{- $c := deepCopy .Values.config -}}
{{- range $f := list "keys" "redis" -}}
{{- if hasKey $c $f -}}
{{- fail (printf "config.%s is set by the chart: use the values apiKeys (keys) or redis" $f) -}}
{{- end -}}
{{- end -}}
{{- $server := default dict $c.server -}}
{{- range $f := list "shutdown_timeout" "drain_delay" -}}
{{- if hasKey $server $f -}}
{{- fail (printf "config.server.%s is set by the chart from the shutdown values, which also size terminationGracePeriodSeconds" $f) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $server "shutdown_timeout" (printf "%ds" (int .Values.shutdown.timeoutSeconds)) -}}
{{- $tls := default dict $server.tls -}}
{{- if eq (toString $tls.mode) "acme" -}}
{{- $storage := default "/var/lib/tradergate/acme" $tls.storage -}}
{{- if ne $storage "/var/lib/tradergate/acme" -}}
{{- fail "config.server.tls.storage must be /var/lib/tradergate/acme, where the chart mounts the acme volume (or left out)" -}}
{{- end -}}
{{- $_ := set $tls "storage" $storage -}}
{{- $_ := set $server "tls" $tls -}}
{{- end -}}
{{- $_ := set $c "server" $server -}}
{{- $r := .Values.redis -}}
{{- $redis := dict "addrs" $r.addrs "master_name" $r.masterName "db" $r.db "username" $r.username "tls" $r.tls "prefix" $r.prefix "timeout" $r.timeout -}}
{{- if $r.password.existingSecret -}}
{{- $_ := set $redis "password_env" "TRADERGATE_REDIS_PASSWORD" -}}
{{- end -}}
{{- if $r.ca.existingSecret -}}
{{- $_ := set $redis "ca_file" (printf "/etc/tradergate/redis-ca/%s" $r.ca.key) -}}
{{- end -}}
{{- $_ := set $c "redis" $redis -}}
{{- $admin := default dict $c.admin -}}
{{- if include "tradergate.adminTokenSecret" . -}}
{{- $_ := set $admin "token_env" "TRADERGATE_ADMIN_TOKEN" -}}
{{- else if not $admin.insecure_open -}}
{{- fail "adminToken: no token for the admin listener (create false, no existingSecret): the listener is on the pod's address, so set adminToken.create or adminToken.existingSecret, or config.admin.insecure_open: true to serve it without a token" -}}
{{- end -}}
{{- $_ := set $c "admin" $admin -}}
{{- toYaml $c -}}
{{- end -}}

{{/* tradergate.adminTokenSecret is the name of the Secret holding the admin token: the user's, the chart's own, or "" for none. */}}
{{- define "tradergate.adminTokenSecret" -}}
{{- if .Values.adminToken.existingSecret -}}
{{- .Values.adminToken.existingSecret -}}
{{- else if .Values.adminToken.create -}}
{{- printf "%s-admin" (include "tradergate.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* tradergate.adminPort is the admin listener's port; probes need one. */}}
{{- define "tradergate.adminPort" -}}
{{- $listen := toString (dig "admin" "listen" "" .Values.config) -}}
{{- if or (eq $listen "off") (eq $listen "") (hasPrefix "127." $listen) (hasPrefix "localhost:" $listen) (hasPrefix "[::1]:" $listen) -}}
{{- fail "config.admin.listen must be an address the kubelet reaches (\":9090\"): readiness and liveness probe /readyz and /healthz there" -}}
{{- end -}}
{{- include "tradergate.port" $listen -}}
{{- end -}}

{{/* tradergate.plainPort is server.tls.http_listen's port, or "" when no plain-HTTP listener runs. */}}
{{- define "tradergate.plainPort" -}}
{{- $tls := dig "server" "tls" dict .Values.config -}}
{{- $mode := toString (default "off" $tls.mode) -}}
{{- if and (ne $mode "off") (ne $mode "false") -}}
{{- $l := ":80" -}}
{{- if hasKey $tls "http_listen" -}}
{{- $l = toString $tls.http_listen -}}
{{- end -}}
{{- if $l -}}
{{- include "tradergate.port" $l -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
tradergate.memory is README's sizing rule ("Running at scale", Memory):
1.5 x cache.max_bytes + 64 MiB, in whole MiB rounded up.
*/}}
{{- define "tradergate.memory" -}}
{{- $max := int64 (required "config.cache.max_bytes is required: the memory request and limit follow it" (dig "cache" "max_bytes" nil .Values.config)) -}}
{{- $bytes := add (div (mul $max 3) 2) 67108864 -}}
{{- printf "%dMi" (div (add $bytes 1048575) 1048576) -}}
{{- end -}}
