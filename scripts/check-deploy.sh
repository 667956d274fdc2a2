#!/usr/bin/env bash
# Checks the deployment files offline, with the tools their ecosystems use (make test-deploy):
#   - `make install` into a scratch prefix, then its systemd units through `systemd-analyze
#     verify` (which also finds their ExecStart binary and their man pages): no finding at all;
#   - the bash completion completes a subcommand;
#   - the Debian package through lintian: no error;
#   - the Kubernetes manifests, and the Helm chart rendered with its defaults and with TLS on,
#     through helm lint, kubernetes-validate (strict, the cluster's own schemas) and checkov
#     (its Kubernetes policies, each skip justified in the manifest).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "check-deploy: make install into a scratch prefix, systemd-analyze verify"
make --no-print-directory install PREFIX="$scratch/usr" >/dev/null
findings=$(MANPATH="$scratch/usr/share/man" systemd-analyze verify \
  "$scratch"/usr/lib/systemd/system/wattio-*.service 2>&1 || true)
if [ -n "$findings" ]; then
  echo "check-deploy: systemd-analyze verify found:" >&2
  echo "$findings" >&2
  exit 1
fi

echo "check-deploy: bash completion"
got=$(bash -c "source '$scratch/usr/share/bash-completion/completions/wattio'
  COMP_WORDS=(wattio expo); COMP_CWORD=1; COMP_LINE='wattio expo'; COMP_POINT=11
  _wattio wattio expo wattio; echo \"\${COMPREPLY[*]}\"")
if [ "$got" != "export" ]; then
  echo "check-deploy: 'wattio expo<TAB>' completed to '$got', not 'export'" >&2
  exit 1
fi

echo "check-deploy: lintian"
lintian --fail-on error --suppress-tags initial-upload-closes-no-bugs "$TARGET"/debian/wattio_*.deb

echo "check-deploy: helm lint, kubernetes-validate and checkov"
VENV="$TARGET/deploy-venv"
if ! "$VENV/bin/checkov" --version 2>/dev/null | grep -q '^3.3.30$'; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q kubernetes-validate==1.37.0 checkov==3.3.30
fi
HELM="$(go env GOPATH)/bin/helm"
"$HELM" lint --quiet deploy/helm/wattio >/dev/null
mkdir -p "$scratch/chart"
"$HELM" template wattio deploy/helm/wattio -n wattio > "$scratch/chart/defaults.yaml"
"$HELM" template wattio deploy/helm/wattio -n wattio --set exporter.webConfigSecret=wattio-web \
  --set exporter.tls=true --set exporter.bearerTokenSecret=wattio-token --set exporter.by= \
  --set-json 'serviceMonitor.endpoint={"tlsConfig":{"ca":{"secret":{"name":"wattio-ca","key":"ca.crt"}},"serverName":"wattio"},"bearerTokenSecret":{"name":"wattio-token","key":"token"}}' \
  > "$scratch/chart/tls.yaml"
grep -q 'scheme: HTTPS' "$scratch/chart/tls.yaml"
grep -q -- '--bearer-token-file=/etc/wattio-token/token' "$scratch/chart/tls.yaml"
for dir in deploy/kubernetes "$scratch/chart"; do
  # No schema for the Prometheus Operator's and kustomize's kinds: those warnings are expected;
  # an invalid resource makes it exit non-zero.
  "$VENV/bin/kubernetes-validate" --strict --quiet --no-warn "$dir"/*.yaml
  "$VENV/bin/checkov" -d "$dir" --framework kubernetes --compact --quiet --skip-download
done
echo "check-deploy: all clean"
