#!/usr/bin/env bash
# The README's test command: installs what it needs, builds, runs every test with ctest.
#   scripts/test.sh --sanitize=address|thread [ctest args...]  builds with ASan+UBSan (the whole
#   suite) or TSan (the concurrent suites) in build-asan/ or build-tsan/ instead
#   (scripts/test-sanitized.sh; docs/reliability.md, "Sanitizers").
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  --sanitize=*)
    kind="${1#--sanitize=}"
    shift
    scripts/install-deps.sh
    exec scripts/test-sanitized.sh "$kind" "$@"
    ;;
esac
scripts/install-deps.sh
scripts/build.sh
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 600 -j"$(nproc)" "$@"
