#!/bin/sh
# Runs each libFuzzer target of tests/fuzz for a time budget (docs/reliability.md).
#   tests/fuzz/run_fuzzers.sh [seconds per target, default 60] [build dir, default build-fuzz] [target...]
# The build dir must be configured with clang and -DRINGSIDE_FUZZ=ON and built (--target fuzzers).
# Each target starts from a working corpus in <build dir>/fuzz-corpus/<target> (seeded from
# tests/fuzz/corpus/<target> and, where the fixtures have inputs of its kind, the shared/
# fixtures read-only); crashes land in <build dir>/fuzz-artifacts/<target>/. Each run checks for
# leaks (-detect_leaks=1), hangs (-timeout=10 s per input) and memory (-rss_limit_mb=2048).
# FUZZ_NICE (default 10) is the niceness the fuzzers run at.
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
build=${2:-$src/build-fuzz}
shift 2 2>/dev/null || shift $#
targets=${*:-"ingest_session collective_stream sysfs_text topology_text ethtool_text ethtool_ioctl
  netlink_link mad_fields journal_segment trace_import detection_config scenario_yaml
  series_defs_wire sample_batch_wire"}
shared=${RINGSIDE_SHARED_DIR:-$src/../shared}
status=0
for t in $targets; do
  work=$build/fuzz-corpus/$t
  art=$build/fuzz-artifacts/$t
  mkdir -p "$work" "$art"
  cp -n "$src/tests/fuzz/corpus/$t/"* "$work/" 2>/dev/null || true
  extra=""
  case $t in
    topology_text)
      max_len=16384
      for d in ibnetdiscover ibsim-net; do
        [ -d "$shared/fixtures/tool-outputs/$d" ] && extra="$extra $shared/fixtures/tool-outputs/$d"
      done ;;
    sysfs_text) max_len=128 ;;
    ethtool_text)
      max_len=16384
      [ -d "$shared/fixtures/tool-outputs/ethtool" ] && extra="$shared/fixtures/tool-outputs/ethtool" ;;
    ethtool_ioctl | trace_import | journal_segment) max_len=16384 ;;
    mad_fields) max_len=260 ;;
    detection_config) max_len=4096 ;;
    scenario_yaml) max_len=8192; extra="$src/tests/scenarios" ;;
    *) max_len=8192 ;;
  esac
  echo "== $t: ${secs}s"
  # shellcheck disable=SC2086
  if ! nice -n "${FUZZ_NICE:-10}" "$build/tests/fuzz/${t}_fuzzer" -max_total_time="$secs" \
      -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 \
      -artifact_prefix="$art/" \
      "$work" $extra 2>"$build/fuzz-$t.log"; then
    echo "!! $t found a crash: see $build/fuzz-$t.log and $art/"
    status=1
  fi
  grep -E '^(#[0-9]+.*DONE|stat::)' "$build/fuzz-$t.log" || tail -5 "$build/fuzz-$t.log"
done
exit $status
