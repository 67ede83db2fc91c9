#!/usr/bin/env bash
# ctest deploy_image_rootfs (tests/deploy/packaging.cmake): the container image's root filesystem
# as deploy/image/build.sh --rootfs-only makes it, and the programs run from it the way the
# container runtime would start them: chroot, as the image's non-root user.
#   image_rootfs_test.sh DEBS_DIR WORK_DIR SYSFS_FIXTURE
# Containers cannot be started on the CI machines; chroot --userspec stands in for the runtime.
# A missing shared library or file fails it. Needs root; skips (exit 77) otherwise. The root
# filesystem lives on a tmpfs (WORK_DIR/image-root) in the test's own mount namespace.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
debs="$(cd "$1" && pwd)"; work="$(mkdir -p "$2" && cd "$2" && pwd)"; fixture="$3"
UID_GID=9471:9471   # deploy/image/build.sh, docs/deploy.md, the Kubernetes manifests
# shellcheck source-path=SCRIPTDIR source=tmpfs_root.sh
. "$HERE/tmpfs_root.sh"
tmpfs_root_enter "mmdebstrap writes the image's root filesystem and the test chroots into it" "$work/image-root" "$@"

step "deploy/image/build.sh --rootfs-only"
if ! "$HERE/../../deploy/image/build.sh" --debs "$debs" --rootfs-only "$root" \
       --cache "$work/apt-cache" >"$work/image-build.log" 2>&1; then
  tail -30 "$work/image-build.log"; echo "FAIL: deploy/image/build.sh"; exit 1
fi
grep '^prune-rootfs' "$work/image-build.log" || true
step "rootfs ready: $(du -sh "$root" | cut -f1)"
as_user() { chroot --userspec="$UID_GID" "$root" "$@"; }

# --- The OCI image made from this root filesystem, before the checks below write into it:
# build.sh's podman import, the configuration the runtime would read, the OCI archive.
if command -v podman >/dev/null; then
  step "deploy/image/build.sh --from-rootfs (podman import)"
  tag="localhost/ringside-image-test:$$"
  # Short, whatever the build directory: podman refuses a runroot of over 50 characters.
  store="$(mktemp -d /tmp/rs-podman.XXXXXX)"; rm -f "$work/image.oci.tar"
  pod=(podman --root "$store/storage" --runroot "$store/run")
  if "$HERE/../../deploy/image/build.sh" --from-rootfs "$root" --tag "$tag" --podman-root "$store" \
       --oci-archive "$work/image.oci.tar" >"$work/image-import.log" 2>&1; then
    cfg="$("${pod[@]}" inspect "$tag" --format '{{json .Config.Entrypoint}} {{.Config.User}}' 2>&1)"
    [ "$cfg" = '["/usr/bin/ringside-agent"] 9471:9471' ] || bad "image entrypoint and user: $cfg"
    label="$("${pod[@]}" inspect "$tag" --format '{{index .Config.Labels "org.opencontainers.image.version"}}' 2>&1)"
    [ "$label" = "$(dpkg-deb -f "$(find "$debs" -name 'ringside-agent_*.deb' -print -quit)" Version)" ] ||
      bad "image version label: $label"
    tar -tf "$work/image.oci.tar" | grep -x 'index.json' >/dev/null || bad "the OCI archive has no index.json"
    "${pod[@]}" rmi -f "$tag" >/dev/null 2>&1 || true
  else
    cat "$work/image-import.log"; bad "deploy/image/build.sh --from-rootfs"
  fi
  rm -rf "$store" "$work/image.oci.tar"
else
  echo "podman is not installed: the image import is not checked (scripts/install-deps.sh installs it)"
fi

# --- What is (not) in it.
for f in /bin/sh /usr/bin/sh /bin/bash /usr/bin/bash /bin/dash /usr/bin/dash /usr/bin/apt \
         /usr/bin/apt-get /usr/bin/dpkg /usr/bin/perl /usr/bin/mawk /usr/sbin/useradd; do
  [ ! -e "$root$f" ] || bad "the image has $f"
done
suid="$(find "$root" -xdev -type f -perm /6000)"
[ -z "$suid" ] || bad "setuid/setgid files: $suid"
grep -qx "ringside:x:${UID_GID%%:*}:${UID_GID##*:}:ringside:/var/lib/ringside:/usr/sbin/nologin" "$root/etc/passwd" ||
  bad "no user ringside ${UID_GID} in /etc/passwd: $(cat "$root/etc/passwd")"
grep -qx "ringside:x:${UID_GID##*:}:" "$root/etc/group" || bad "no group ringside ${UID_GID##*:}"
[ "$(as_user /usr/bin/id -u):$(as_user /usr/bin/id -g)" = "$UID_GID" ] || bad "id in the image"
[ "$(stat -c '%a %U:%G' "$root/usr/lib/ringside/libringside_nccl.so")" = "644 root:root" ] ||
  bad "/usr/lib/ringside/libringside_nccl.so: $(stat -c '%a %U:%G' "$root/usr/lib/ringside/libringside_nccl.so" 2>&1)"
for b in ringside-agent ringside-aggregator ringside install cp mv; do
  [ -x "$root/usr/bin/$b" ] || [ -x "$root/bin/$b" ] || bad "no $b in the image"
done
grep -q '^Package: ringside-agent$' "$root/var/lib/dpkg/status" || bad "dpkg status lacks ringside-agent"
grep -q '^ID=debian$' "$root/etc/os-release" || bad "no /etc/os-release"
# The CA bundle libcurl reads for alerts over https (the system CA store): the build machine's,
# byte for byte, readable by the image's user; not the ca-certificates package (debconf, perl).
ca=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$root$ca" ]; then
  bad "no CA bundle $ca in the image"
else
  [ "$(stat -c '%a %U:%G' "$root$ca")" = "644 root:root" ] || bad "$ca: $(stat -c '%a %U:%G' "$root$ca")"
  cmp -s "$ca" "$root$ca" || bad "$ca differs from the build machine's"
  certs="$(grep -c -- '-----BEGIN CERTIFICATE-----' "$root$ca" || true)"
  [ "$certs" -ge 100 ] 2>/dev/null || bad "$ca holds $certs certificates (Mozilla's store has over 100)"
  [ "$(as_user /usr/bin/head -c 27 "$ca" 2>&1)" = "-----BEGIN CERTIFICATE-----" ] ||
    bad "$ca is not readable by ${UID_GID} in the image"
fi
! grep -q '^Package: ca-certificates$' "$root/var/lib/dpkg/status" ||
  bad "the ca-certificates package is in the image (it pulls debconf and perl)"

# --- Every ELF file's libraries resolve inside the image (the dynamic loader of the image).
step "shared libraries"
ldso=/lib64/ld-linux-x86-64.so.2
while IFS= read -r elf; do
  rel="${elf#"$root"}"
  out="$(chroot "$root" "$ldso" --list "$rel" 2>&1)" || { bad "$rel: ld.so --list failed: $out"; continue; }
  if grep -q 'not found' <<<"$out"; then bad "$rel: $(grep 'not found' <<<"$out" | tr '\n' ' ')"; fi
done < <(find "$root/usr/bin" "$root/bin" "$root/usr/lib/ringside" \
           "$root/usr/lib/x86_64-linux-gnu/libibverbs" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)

# --- The agent, once, on the fixture sysfs tree copied into the image.
step "ringside-agent --once"
mkdir -p "$root/srv/fixture"; cp -a "$fixture" "$root/srv/fixture/sys"
out="$(as_user /usr/bin/ringside-agent --once -o json --sysfs-root=/srv/fixture/sys \
         --node-name=image-test --listen= 2>"$work/image-agent.err")" ||
  { cat "$work/image-agent.err"; bad "ringside-agent --once failed"; }
python3 - "$out" <<'PY' || bad "ringside-agent --once -o json: unexpected output"
import json, sys
series = json.loads(sys.argv[1])
assert len(series) > 20, len(series)
assert all(s["node"] == "image-test" for s in series)
assert any(s["device"] == "mlx4_0" and s["port"] == "1" and s["counter"] == "port_xmit_wait"
           and s["value"] == 4294967295 for s in series), "mlx4_0 port_xmit_wait"
PY
out="$(as_user /usr/bin/ringside --version 2>&1)" || bad "ringside --version: $out"
[[ "$out" == "ringside "[0-9]* ]] || bad "ringside --version printed '$out'"

# --- The aggregator: state in the image's /var/lib/ringside-aggregator, HTTP /healthz on
# loopback, the CLI's Query API call answered, clean exit on SIGTERM.
step "ringside-aggregator"
read -r grpc_port http_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
# chroot itself (not a function, which would run in a subshell) so $! is the aggregator (chroot execs).
chroot --userspec="$UID_GID" "$root" /usr/bin/ringside-aggregator --state-dir=/var/lib/ringside-aggregator \
  --listen="127.0.0.1:$grpc_port" --http-listen="127.0.0.1:$http_port" \
  >"$work/image-aggregator.log" 2>&1 &
agg=$!
healthy=""
for _ in $(seq 1 100); do   # up to 20 s
  if ! kill -0 "$agg" 2>/dev/null; then break; fi
  if healthy="$(python3 -c "import urllib.request,sys; r=urllib.request.urlopen('http://127.0.0.1:$http_port/healthz', timeout=2); print(r.status)" 2>/dev/null)"; then break; fi
  sleep 0.2
done
[ "$healthy" = 200 ] || { cat "$work/image-aggregator.log"; bad "aggregator /healthz: '${healthy}'"; }
out="$(as_user /usr/bin/ringside incidents -o json --aggregator="127.0.0.1:$grpc_port" --timeout=10s 2>&1)" ||
  bad "ringside incidents against the image's aggregator: $out"
owner="$(stat -c '%u:%g' "$root/var/lib/ringside-aggregator")"
[ "$owner" = "$UID_GID" ] || bad "/var/lib/ringside-aggregator owned by $owner"
[ -n "$(ls -A "$root/var/lib/ringside-aggregator")" ] || bad "the aggregator wrote nothing to its state dir"
kill -TERM "$agg" 2>/dev/null || true
rc=""
for _ in $(seq 1 100); do   # up to 20 s
  if ! kill -0 "$agg" 2>/dev/null; then wait "$agg" && rc=0 || rc=$?; break; fi
  sleep 0.2
done
if [ -z "$rc" ]; then kill -KILL "$agg" 2>/dev/null || true; wait "$agg" || true; bad "aggregator did not stop on SIGTERM"
elif [ "$rc" -ne 0 ]; then cat "$work/image-aggregator.log"; bad "aggregator exited $rc on SIGTERM"; fi

step "done"
echo "deploy_image_rootfs: $((SECONDS - start)) s"
exit $fail
