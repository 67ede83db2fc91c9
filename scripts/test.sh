#!/usr/bin/env bash
# The README's test command: installs what it needs, builds, runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 600 -j"$(nproc)" "$@"
