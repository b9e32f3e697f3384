#!/usr/bin/env bash
# chart-crds.sh SRC_DIR DEST_DIR: writes each generated CRD of SRC_DIR
# (crds/*.yaml, controller-gen) into DEST_DIR (the chart's templates/crds/)
# as a template: rendered only with .Values.crds.enabled, annotated
# helm.sh/resource-policy: keep with .Values.crds.keep, and otherwise
# byte-identical. `make manifests` runs it; `make chart-lint` checks that the
# chart's copies are current.
set -euo pipefail
src=$1 dest=$2
mkdir -p "$dest"
rm -f "$dest"/*.yaml
for f in "$src"/*.yaml; do
	grep -q '^    controller-gen.kubebuilder.io/version: ' "$f" || { echo "$f: no controller-gen annotation to add to" >&2; exit 1; }
	{
		echo '{{- if .Values.crds.enabled }}'
		sed '/^    controller-gen.kubebuilder.io\/version: /a\
    {{- if .Values.crds.keep }}\
    helm.sh/resource-policy: keep\
    {{- end }}' "$f"
		echo '{{- end }}'
	} >"$dest/$(basename "$f")"
done
