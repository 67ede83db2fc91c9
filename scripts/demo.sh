#!/usr/bin/env bash
# The README's demo command: installs, builds, and runs `ringside-sim demo`: a simulated cluster
# (8 nodes x 8 GPUs, a 64-rank job) running the real agent, plugin and aggregator, with faults
# injected over about two minutes. Extra arguments go to ringside-sim (e.g. --duration=150s).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
exec "$BUILD_DIR/sim/ringside-sim" demo "$@"
