#!/usr/bin/env bash
# Builds the Debian packages: ringside-agent, ringside-aggregator, ringside-cli and
# ringside-nccl-plugin (plus their -dbgsym .ddeb files), into ./build/packages/
# ($RINGSIDE_BUILD_DIR/packages), and prints their paths. docs/deploy.md: what they contain and
# how to install them. Needs dpkg-dev (dpkg-shlibdeps computes the Depends).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${RINGSIDE_BUILD_DIR:-build}"
scripts/build.sh >&2   # progress on stderr: stdout is the list of packages
rm -rf "$BUILD_DIR/packages"
(cd "$BUILD_DIR" && cpack -G DEB --config CPackConfig.cmake >/dev/null)
find "$(cd "$BUILD_DIR/packages" && pwd)" -maxdepth 1 \( -name '*.deb' -o -name '*.ddeb' \) | sort
