#!/usr/bin/env bash
# Collects what scripts/gpu-check.sh needs on a GPU machine that has no ringside build: the agent,
# the aggregator and the CLI with every library `ldd` lists and the Debian loader that runs them
# (docs/gpu-check.md; reference: a binary run as `ld-linux-x86-64.so.2 --library-path LIB BIN`
# works whatever the host's glibc), the NCCL plugin (it needs only libc and libstdc++), and the
# check script itself. Debug info is stripped from the copies; the folder must stay under 60 MiB.
#
#   scripts/gpu-bundle.sh [OUT_DIR]        # default: build/gpu-bundle; build first (scripts/build.sh)
#   tar -C build -czf gpu-bundle.tgz gpu-bundle   # then copy it over and run gpu-check.sh from it
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
OUT="${1:-$BUILD_DIR/gpu-bundle}"
LIMIT_BYTES=$((60 * 1024 * 1024))

bins=("$BUILD_DIR/daemon/ringside-agent" "$BUILD_DIR/daemon/ringside-aggregator" "$BUILD_DIR/daemon/ringside")
plugin="$BUILD_DIR/collectors/nccl_plugin/libringside_nccl.so"
for f in "${bins[@]}" "$plugin"; do
  if [[ ! -f "$f" ]]; then
    echo "gpu-bundle: $f is missing; build first: cmake --build $BUILD_DIR --target ringside-agent ringside-aggregator ringside ringside_nccl" >&2
    exit 2
  fi
done

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib"
copy_stripped() {  # SRC DST: a copy without debug info (the build is RelWithDebInfo)
  if command -v strip >/dev/null 2>&1; then
    strip --strip-debug -o "$2" "$1"
  else
    cp -L "$1" "$2"
  fi
}

loader=""
for b in "${bins[@]}"; do
  copy_stripped "$b" "$OUT/bin/$(basename "$b")"
  # "libx.so.1 => /lib/x86_64-linux-gnu/libx.so.1 (0x...)" and "/lib64/ld-linux-x86-64.so.2 (0x...)"
  while read -r lib; do
    [[ -z "$lib" || ! -f "$lib" ]] && continue
    dst="$OUT/lib/$(basename "$lib")"
    [[ -f "$dst" ]] || copy_stripped "$(readlink -f "$lib")" "$dst"
  done < <(ldd "$b" | awk '/=>/ && $3 ~ /^\// {print $3} /^[[:space:]]*\/.*ld-linux/ {print $1}')
  l=$(ldd "$b" | awk '/ld-linux/ {for (i = 1; i <= NF; i++) if ($i ~ /ld-linux/ && $i ~ /^\//) print $i}' | head -1)
  [[ -n "$l" ]] && loader="$l"
done
if [[ -z "$loader" ]]; then
  echo "gpu-bundle: no ld-linux in ldd's output" >&2
  exit 2
fi
copy_stripped "$(readlink -f "$loader")" "$OUT/lib/ld-linux-x86-64.so.2"
chmod +x "$OUT/lib/ld-linux-x86-64.so.2"
copy_stripped "$plugin" "$OUT/lib/libringside_nccl.so"
cp scripts/gpu-check.sh "$OUT/gpu-check.sh"
chmod +x "$OUT/gpu-check.sh"
{
  echo "ringside gpu bundle"
  echo "made: $(date -u +%FT%TZ) on $(uname -n)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "run: ./gpu-check.sh --bundle . --out /tmp/ringside-gpu-check"
} >"$OUT/BUNDLE"

size=$(du -sb "$OUT" | cut -f1)
echo "gpu-bundle: $OUT ($((size / 1024 / 1024)) MiB, $(ls "$OUT/lib" | wc -l) libraries)"
if ((size > LIMIT_BYTES)); then
  echo "gpu-bundle: over the 60 MiB limit" >&2
  exit 1
fi
