#!/usr/bin/env bash
# scripts/test-sanitized.sh address|thread [ctest args...]
# (also: scripts/test.sh --sanitize=address|thread [ctest args...])
#
# Builds ringside with a sanitizer in a build dir of its own and runs ctest there:
#   address  ASan + UBSan (UBSan not recoverable), build-asan/, the whole suite except the tests
#            labelled no_sanitize (tests/sanitize/sanitize.cmake says why next to each).
#   thread   TSan, build-tsan/, only the tests labelled tsan (the concurrent suites: uploader,
#            collective listener, ingest service, analysis host, alerts dispatcher, plugin
#            ring/sender, shard watch, incident watch).
# Sanitizer options (halt on the first report, suppressions) are ctest ENVIRONMENT properties set
# in tests/CMakeLists.txt, so `ctest` in the build dir behaves the same as this script.
# Not run in CI: see docs/reliability.md ("Sanitizers") for the times that explain why.
# Environment: RINGSIDE_SANITIZE_JOBS (build and ctest parallelism, default 2), RINGSIDE_NICE
# (default 15), RINGSIDE_SANITIZE_BUILD_DIR (default build-asan / build-tsan).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-}"
case "$kind" in
  address) dir_default=build-asan; select=(-LE no_sanitize) ;;
  thread) dir_default=build-tsan; select=(-L tsan -LE no_sanitize) ;;
  *) echo "usage: $0 address|thread [ctest args...]" >&2; exit 2 ;;
esac
shift
BUILD_DIR="${RINGSIDE_SANITIZE_BUILD_DIR:-$dir_default}"
JOBS="${RINGSIDE_SANITIZE_JOBS:-2}"
NICE="${RINGSIDE_NICE:-15}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# -O0 -g1: line tables only, no optimisation: on this shared 2-core machine an instrumented
# translation unit compiles in about 60% of the CPU time of -O1 (ingest_core.cc: 6.3 s vs 10.5 s).
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGSIDE_SANITIZE="$kind" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" \
  -DRINGSIDE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
start=$(date +%s)
if [ "$kind" = thread ]; then
  # Only what the tsan-labelled tests need.
  nice -n "$NICE" cmake --build "$BUILD_DIR" -j"$JOBS" --target ringside_tsan_tests
else
  nice -n "$NICE" cmake --build "$BUILD_DIR" -j"$JOBS"
fi
echo "build: $(( $(date +%s) - start )) s"
cd "$BUILD_DIR"
start=$(date +%s)
status=0
nice -n "$NICE" ctest --output-on-failure --timeout 1200 -j"$JOBS" "${select[@]}" "$@" || status=$?
echo "ctest: $(( $(date +%s) - start )) s"
exit $status
