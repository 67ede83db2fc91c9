#!/bin/sh
# ctest driver of kubernetes_manifests_test (tests/deploy/kubernetes.cmake):
#   run.sh SOURCE_DIR WORK_DIR [--agent-bin=PATH --aggregator-bin=PATH]
# Installs the pinned npm packages of package-lock.json into WORK_DIR (npm ci, only when the lock
# changed since the last install), then runs validate.mjs against SOURCE_DIR/deploy/kubernetes.
# Exit 77 (ctest: skipped) when kubectl or node is not installed. Set RINGSIDE_KUBECTL_COMPAT to
# an old kubectl (e.g. Debian 12's 1.20) to also check that the base renders the same with it.
set -eu
src=$1
work=$2
shift 2
here="$src/tests/deploy/kubernetes"
KUBECTL=${KUBECTL:-kubectl}

if ! command -v "$KUBECTL" >/dev/null 2>&1; then
  echo "SKIP: kubectl is not installed (needed for kubectl kustomize)"; exit 77
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (needed for the schema checks)"; exit 77
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "FAIL: node is installed but npm is not (Debian: apt-get install npm)"; exit 1
fi
echo "$("$KUBECTL" version --client 2>/dev/null | head -2 | tr '\n' ' ')"
echo "node $(node --version), npm $(npm --version)"

mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/validate.mjs" "$work/"
stamp="$work/node_modules/.ringside-lock"
if [ ! -f "$stamp" ] || ! cmp -s "$here/package-lock.json" "$stamp"; then
  echo "npm ci (package-lock.json changed or first run) in $work"
  rc=0
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error --fetch-retries=1 \
      --fetch-timeout=30000) >"$work/npm-ci.log" 2>&1 || rc=$?
  grep -v EBADENGINE "$work/npm-ci.log" | grep -v '^npm warn' || true
  if [ "$rc" -ne 0 ] || [ ! -d "$work/node_modules/kubernetes-models" ]; then
    echo "FAIL: npm ci could not install the pinned packages (exit $rc; is the npm registry" \
         "$(npm config get registry) reachable?). Log: $work/npm-ci.log"
    exit 1
  fi
  cp "$here/package-lock.json" "$stamp"
fi

set -- --root="$src" --kubectl="$KUBECTL" "$@"
if [ -n "${RINGSIDE_KUBECTL_COMPAT:-}" ]; then set -- "$@" --compat-kubectl="$RINGSIDE_KUBECTL_COMPAT"; fi
exec node "$work/validate.mjs" "$@"
