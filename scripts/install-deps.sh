#!/usr/bin/env bash
# Installs what ringside needs to build, test and run, from Debian 12 packages only.
# Skips apt entirely when everything is already there (so a second run is quick).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libabsl-dev prometheus-cpp-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev libssl-dev libcurl4-openssl-dev zlib1g-dev nlohmann-json3-dev libsystemd-dev
  rdma-core libibverbs-dev libibumad-dev libibmad-dev infiniband-diags
  ibsim-utils libumad2sim0 opensm
  lldpd liblldpctl-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  prometheus prometheus-node-exporter prometheus-alertmanager
  libyaml-cpp-dev tmux
  systemd python3
  iproute2 ethtool procps openssl
  dpkg-dev mmdebstrap podman
  clang-14 libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
