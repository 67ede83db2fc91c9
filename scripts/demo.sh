#!/usr/bin/env bash
# The README's demo command: installs, builds, and runs ringside on an embedded simulated node.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
exec "$BUILD_DIR/sim/ringside-sim" demo --agent="$BUILD_DIR/daemon/ringside-agent" "$@"
