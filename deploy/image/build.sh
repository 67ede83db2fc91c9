#!/usr/bin/env bash
# Builds the ringside container image (OCI) from Debian 12 packages and the four ringside .deb
# files, or only its root filesystem.
#
#   deploy/image/build.sh [--debs DIR] [--tag NAME[:TAG]] [--oci-archive FILE]
#   deploy/image/build.sh [--debs DIR] --rootfs-only DIR
#   deploy/image/build.sh --from-rootfs DIR [--tag ...] [--oci-archive FILE]
#
# --debs DIR        the ringside .deb files (default: build/packages, from scripts/package.sh)
# --rootfs-only DIR write the root filesystem into DIR (new or empty) and stop: no podman needed
# --tag NAME[:TAG]  image name (default: ringside:<upstream version of the packages>)
# --from-rootfs DIR make the image from DIR, a root filesystem --rootfs-only wrote (no mmdebstrap)
# --oci-archive F   also save the image as an OCI archive file F (podman save)
# --podman-root DIR podman's storage in DIR/storage and DIR/run instead of the system's
# --cache DIR       reuse and keep downloaded Debian packages in DIR (default: none)
# --ca-bundle FILE  the CA certificates (PEM) the image gets as /etc/ssl/certs/ca-certificates.crt
#                   (default: that file of the machine that builds, from its ca-certificates)
#
# What is in it (docs/deploy.md, "Container image"): the files of ringside-agent,
# ringside-aggregator, ringside-cli and ringside-nccl-plugin; the Debian packages their binaries
# link (the packages' own Depends, from dpkg-shlibdeps) and the RDMA providers libibverbs loads,
# base-files and coreutils (install, cp and mv for the Kubernetes init containers); the CA bundle
# /etc/ssl/certs/ca-certificates.crt (libcurl's CA store, for alerts over https), copied from the
# build machine because the ca-certificates package needs debconf and perl; not what only
# maintainer scripts use (adduser, passwd, debconf: prune-rootfs.py). Nothing runs at run time but the ringside binaries: no apt,
# no dpkg, no shell (/bin/sh does not exist). The packages are unpacked with mmdebstrap's
# extract variant, so no maintainer script runs; the accounts are written here instead:
# user and group "ringside", uid and gid 9471 (the Kubernetes manifests' runAsUser/runAsGroup).
# Entrypoint /usr/bin/ringside-agent, user 9471:9471. /var/lib/dpkg/status lists every package
# unpacked, for image scanners.
#
# Needs root (or mmdebstrap's unshare mode with subuids for --oci-archive/--tag only), mmdebstrap,
# a Debian 12 mirror (deploy/image/mmdebstrap-common.sh), and podman unless --rootfs-only.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source-path=SCRIPTDIR source=mmdebstrap-common.sh
. "$HERE/mmdebstrap-common.sh"

RINGSIDE_UID=9471
RINGSIDE_GID=9471

debs="$REPO/${RINGSIDE_BUILD_DIR:-build}/packages"
rootfs_only=""
from_rootfs=""
podman_root=""
tag=""
oci_archive=""
cache=""
ca_bundle=/etc/ssl/certs/ca-certificates.crt
while [ $# -gt 0 ]; do
  case "$1" in
    --debs) debs="$2"; shift 2 ;;
    --debs=*) debs="${1#*=}"; shift ;;
    --rootfs-only) rootfs_only="$2"; shift 2 ;;
    --rootfs-only=*) rootfs_only="${1#*=}"; shift ;;
    --from-rootfs) from_rootfs="$2"; shift 2 ;;
    --from-rootfs=*) from_rootfs="${1#*=}"; shift ;;
    --podman-root) podman_root="$2"; shift 2 ;;
    --podman-root=*) podman_root="${1#*=}"; shift ;;
    --tag) tag="$2"; shift 2 ;;
    --tag=*) tag="${1#*=}"; shift ;;
    --oci-archive) oci_archive="$2"; shift 2 ;;
    --oci-archive=*) oci_archive="${1#*=}"; shift ;;
    --cache) cache="$2"; shift 2 ;;
    --cache=*) cache="${1#*=}"; shift ;;
    --ca-bundle) ca_bundle="$2"; shift 2 ;;
    --ca-bundle=*) ca_bundle="${1#*=}"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

podman=(podman)
[ -z "$podman_root" ] || podman+=(--root "$podman_root/storage" --runroot "$podman_root/run")
if [ -z "$rootfs_only" ]; then
  command -v podman >/dev/null || { echo "build.sh: podman is not installed (apt-get install podman; or use --rootfs-only)" >&2; exit 1; }
fi

if [ -n "$from_rootfs" ]; then
  [ -f "$from_rootfs/var/lib/dpkg/status" ] || { echo "build.sh: $from_rootfs is not a root filesystem from --rootfs-only" >&2; exit 1; }
  version="$(awk '/^Package: ringside-agent$/ {p=1} p && /^Version:/ {print $2; exit}' "$from_rootfs/var/lib/dpkg/status")"
  upstream="${version#*:}"; upstream="${upstream%-*}"
  [ -n "$tag" ] || tag="ringside:$upstream"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  target="$work/rootfs.tar"
  tar -C "$from_rootfs" --numeric-owner --sort=name -cf "$target" .
else
  command -v mmdebstrap >/dev/null || { echo "build.sh: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 1; }
  grep -q -- '-----BEGIN CERTIFICATE-----' "$ca_bundle" 2>/dev/null ||
    { echo "build.sh: $ca_bundle is not a CA bundle (apt-get install ca-certificates, or --ca-bundle FILE)" >&2; exit 1; }
  ca_bundle="$(cd "$(dirname "$ca_bundle")" && pwd)/$(basename "$ca_bundle")"
  debs="$(cd "$debs" && pwd)"
  pkgs=()
  for name in ringside-agent ringside-aggregator ringside-cli ringside-nccl-plugin; do
    mapfile -t found < <(find "$debs" -maxdepth 1 -name "${name}_*.deb" | sort -V)
    [ ${#found[@]} -ge 1 ] || { echo "build.sh: no ${name}_*.deb in $debs (scripts/package.sh builds them)" >&2; exit 1; }
    pkgs+=("${found[-1]}")
  done
  version="$(dpkg-deb -f "${pkgs[0]}" Version)"
  upstream="${version#*:}"; upstream="${upstream%-*}"
  [ -n "$tag" ] || tag="ringside:$upstream"

  # The Debian packages the binaries need: the union of the ringside packages' Depends, version
  # constraints dropped (the mirror is the release they were built against), minus what only their
  # maintainer scripts use (systemd-sysusers: here the accounts are written directly).
  script_only='^(systemd|systemd-standalone-sysusers|systemd-sysusers)$'
  mapfile -t deps < <(
    for p in "${pkgs[@]}"; do dpkg-deb -f "$p" Depends; echo; done |
    tr ',' '\n' | sed 's/([^)]*)//g; s/[[:space:]]//g' | sed '/^$/d' |
    while IFS= read -r alt; do
      # An alternative ("a|b") is kept as its first member unless it is a script-only one.
      first="${alt%%|*}"
      [[ "$first" =~ $script_only ]] || echo "$first"
    done | sort -u)
  # ibverbs-providers: the RDMA device drivers libibverbs loads (only Recommended by libibverbs1).
  include="base-files,coreutils,ibverbs-providers$(printf ',%s' "${deps[@]}")"

  mapfile -t mirrors < <(ringside_debian_mirrors)
  cache_args=()
  [ -z "$cache" ] || mapfile -t cache_args < <(ringside_cache_args "$cache" extract)

  if [ -n "$rootfs_only" ]; then
    target="$rootfs_only"
    if [ -e "$target" ] && [ -n "$(ls -A "$target")" ]; then
      echo "build.sh: $target is not empty" >&2; exit 1
    fi
    mode=root
  else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    target="$work/rootfs.tar"
    mode=auto
  fi

  # Extract variant: unpack exactly these packages and their dependencies; run nothing inside. (In
  # this variant hooks run at the extract step; customize hooks would not run at all.)
  mmdebstrap --mode="$mode" --variant=extract --include="$include" \
    --aptopt='Apt::Install-Recommends "false"' \
    "${cache_args[@]}" \
    --extract-hook="'$HERE/customize-rootfs.sh' \"\$1\" $RINGSIDE_UID $RINGSIDE_GID '$ca_bundle' $include ${pkgs[*]}" \
    bookworm "$target" "${mirrors[@]}" </dev/null

  if [ -n "$rootfs_only" ]; then
    echo "$target"
    exit 0
  fi
fi

"${podman[@]}" import \
  --change 'ENTRYPOINT ["/usr/bin/ringside-agent"]' \
  --change 'CMD []' \
  --change "USER $RINGSIDE_UID:$RINGSIDE_GID" \
  --change 'WORKDIR /' \
  --change "LABEL org.opencontainers.image.title=ringside" \
  --change "LABEL org.opencontainers.image.version=$version" \
  --change "LABEL org.opencontainers.image.description=ringside-agent, ringside-aggregator, the ringside CLI and the NCCL profiler plugin (/usr/lib/ringside/libringside_nccl.so)" \
  "$target" "$tag" >/dev/null
if [ -n "$oci_archive" ]; then
  rm -f "$oci_archive"
  "${podman[@]}" save --format oci-archive -o "$oci_archive" "$tag" >/dev/null
fi
echo "$tag"
