#!/usr/bin/env bash
# Configures and builds ringside into ./build (or $RINGSIDE_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
launcher=()
# ccache when the machine has it (not installed by install-deps.sh: a fresh machine builds without it)
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
