{{/* Parts the init containers and the edge container share. */}}
{{- define "tradergate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}
{{- define "tradergate.env" -}}
- name: {{ dig "upstream" "key_env" "TRADERGATE_UPSTREAM_KEY" .Values.config | quote }}
  valueFrom:
    secretKeyRef:
      name: {{ required "upstreamKey.existingSecret is required" .Values.upstreamKey.existingSecret }}
      key: {{ .Values.upstreamKey.key | quote }}
{{- if .Values.redis.password.existingSecret }}
- name: TRADERGATE_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.password.existingSecret }}
      key: {{ .Values.redis.password.key | quote }}
{{- end }}
{{- with include "tradergate.adminTokenSecret" . }}
- name: TRADERGATE_ADMIN_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.adminToken.key | quote }}
{{- end }}
{{- end -}}
{{- define "tradergate.volumeMounts" -}}
- {name: config, mountPath: /run/tradergate, readOnly: true}
- {name: tmp, mountPath: /var/tmp}
{{- if .Values.tls.existingSecret }}
- {name: tls, mountPath: /etc/tradergate/tls, readOnly: true}
{{- end }}
{{- if .Values.redis.ca.existingSecret }}
- {name: redis-ca, mountPath: /etc/tradergate/redis-ca, readOnly: true}
{{- end }}
{{- if eq (toString (dig "server" "tls" "mode" "off" .Values.config)) "acme" }}
- {name: acme, mountPath: /var/lib/tradergate/acme}
{{- if .Values.acme.caRootsSecret }}
- {name: acme-roots, mountPath: /etc/tradergate/acme-roots, readOnly: true}
{{- end }}
{{- end }}
{{- end -}}
