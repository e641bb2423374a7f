{{/* Names, labels and images shared by the templates. */}}

{{- define "backscroll.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "backscroll.fullname" -}}
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

{{- define "backscroll.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "backscroll.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The operator's selector: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "backscroll.operatorSelector" -}}
app.kubernetes.io/name: {{ include "backscroll.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "backscroll.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "backscroll.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "backscroll.operatorImage" -}}
{{- printf "%s:%s" .Values.operator.image.repository (default .Chart.AppVersion .Values.operator.image.tag) }}
{{- end }}

{{- define "backscroll.searchIndexNamespace" -}}
{{- default .Release.Namespace .Values.searchIndex.namespace }}
{{- end }}

{{/*
The namespaces the operator watches, as a JSON list: operator.watchNamespaces, or the release
namespace alone; `[]` with operator.clusterWide (every namespace). Read it with fromJsonArray.
*/}}
{{- define "backscroll.watchNamespaces" -}}
{{- if .Values.operator.clusterWide }}
{{- if .Values.operator.watchNamespaces }}
{{- fail "operator.clusterWide watches every namespace: leave operator.watchNamespaces empty" }}
{{- end }}
{{- list | toJson }}
{{- else }}
{{- default (list .Release.Namespace) .Values.operator.watchNamespaces | toJson }}
{{- end }}
{{- end }}

{{/*
What the operator does inside the namespaces it watches, and nothing more. tests/deploy/test_rbac.py
compares these rules with the calls the operator's code makes (its own client, recorded) plus
kopf's (watching the SearchIndexes, its annotations and finalizer, status, Events).
*/}}
{{- define "backscroll.namespacedRules" -}}
# kopf and the operator: list and watch SearchIndexes, read one before each pass, patch the
# operator's finalizer (deletionPolicy: delete) and kopf's annotations, and the status.
- apiGroups: [search.backscroll.dev]
  resources: [searchindexes]
  verbs: [get, list, watch, patch]
- apiGroups: [search.backscroll.dev]
  resources: [searchindexes/status]
  verbs: [patch]
# Events (core v1) about each SearchIndex.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# The operator's children, watched (drift is reverted when it happens) and server-side applied
# (create: an apply that creates is authorized as a create); removed when the plan drops them.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch, delete]
# PodDisruptionBudgets (Deployments of 2+ replicas), the API's HorizontalPodAutoscaler
# (spec.api.autoscaling) and the NetworkPolicies (spec.networkPolicy): children like the above.
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch, create, patch, delete]
# Jobs are never patched (immutable); superseded ones are found by label and deleted.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, list, watch, create, delete]
# spec.database.backupBeforeMigration: the CloudNativePG Backup a migration waits for
# (created once per migration, its phase read; never changed or deleted by hand).
- apiGroups: [postgresql.cnpg.io]
  resources: [backups]
  verbs: [get, create]
# Read: that the pods' Secrets exist with their keys (their resourceVersion rolls the pods on
# rotation; nothing computed from a value is written anywhere); create: the operator's own status
# token Secret. Never listed or watched. patch and delete: a SearchWorkspace's token Secrets (its
# own `<name>-tokens` and the targets it delivers), rewritten on drift, deleted on revocation.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch, delete]
# SearchWorkspaces: listed and watched, read before each pass, their finalizer patched; the status.
- apiGroups: [search.backscroll.dev]
  resources: [searchworkspaces]
  verbs: [get, list, watch, patch]
- apiGroups: [search.backscroll.dev]
  resources: [searchworkspaces/status]
  verbs: [patch]
# A failed migration's pods: the first line of their error, from the termination message.
- apiGroups: [""]
  resources: [pods]
  verbs: [list]
# spec.database.cnpgClusterRef: the CloudNativePG cluster's uid (a new cluster is migrated) and
# its Ready condition (a migration waits for it; watched, so it starts once the cluster is Ready).
- apiGroups: [postgresql.cnpg.io]
  resources: [clusters]
  verbs: [get, list, watch]
{{- end }}

{{/* The pod of a chart Job (chart-jobs.yaml): the operator image, locked down as the operator is. */}}
{{- define "backscroll.chartJobPod" -}}
serviceAccountName: {{ .account }}
restartPolicy: Never
{{- with .Values.operator.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.operator.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.operator.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
containers:
  - name: job
    image: {{ .image | quote }}
    imagePullPolicy: {{ .Values.operator.image.pullPolicy }}
    command: [python, -m, backscroll_operator.chartjobs]
    args:
      {{- toYaml .args | nindent 6 }}
    resources:
      requests: {cpu: 10m, memory: 64Mi}
      limits: {memory: 128Mi}
    securityContext:
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities:
        drop: [ALL]
    volumeMounts:
      - name: tmp
        mountPath: /tmp
volumes:
  # the root filesystem is read-only; Python and the Kubernetes client may want a scratch dir
  - name: tmp
    emptyDir:
      sizeLimit: 16Mi
{{- end }}
