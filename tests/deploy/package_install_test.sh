#!/usr/bin/env bash
# ctest deploy_package_install (tests/deploy/packaging.cmake): the four .deb files in a fresh
# Debian 12 root made by mmdebstrap, then an upgrade, a reinstall, remove, purge and an install
# after the purge, checking after each step what an administrator would.
#   package_install_test.sh DEBS_DIR WORK_DIR SYSFS_FIXTURE
# Needs root (mmdebstrap's root mode and chroot); skips (exit 77) otherwise. Needs the Debian
# mirror this machine's apt uses (deploy/image/mmdebstrap-common.sh). Downloads are kept in
# WORK_DIR/apt-cache for the next run. The root lives on a tmpfs (WORK_DIR/package-root) in
# the test's own mount namespace and is gone when it ends; the logs stay in WORK_DIR.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=../../deploy/image/mmdebstrap-common.sh
. "$HERE/../../deploy/image/mmdebstrap-common.sh"
debs="$(cd "$1" && pwd)"; work="$(mkdir -p "$2" && cd "$2" && pwd)"; fixture="$3"
# shellcheck source-path=SCRIPTDIR source=tmpfs_root.sh
. "$HERE/tmpfs_root.sh"
tmpfs_root_enter "mmdebstrap makes the Debian root and the test chroots into it" "$work/package-root" "$@"

pkgs=(ringside-agent ringside-aggregator ringside-cli ringside-nccl-plugin)
first=()
for p in "${pkgs[@]}"; do
  f="$(find "$debs" -maxdepth 1 -name "${p}_*_amd64.deb" -print -quit)"
  [ -n "$f" ] || { echo "FAIL: no ${p}_*_amd64.deb in $debs"; exit 1; }
  first+=("$f")
done
version="$(dpkg-deb -f "${first[0]}" Version)"

# The same packages as a newer version, for the upgrade (only the Version field differs).
newer="$work/debs-newer"; rm -rf "$newer"; mkdir -p "$newer"
upgrade_version="${version}+upgradetest1"
for f in "${first[@]}"; do
  t="$newer/tree"; rm -rf "$t"; dpkg-deb -R "$f" "$t"
  sed -i "s/^Version: .*/Version: $upgrade_version/" "$t/DEBIAN/control"
  dpkg-deb -Zgzip -b "$t" "$newer/" >/dev/null
done
rm -rf "$newer/tree"
mapfile -t second < <(find "$newer" -name '*.deb' | sort)

# --- 1. A fresh Debian 12 (minbase) with the four packages, installed by apt with their
# dependencies from the mirror, maintainer scripts run inside the new root.
step "mmdebstrap: Debian 12 minbase + ${pkgs[*]} $version"
mapfile -t mirrors < <(ringside_debian_mirrors)
mapfile -t cache_args < <(ringside_cache_args "$work/apt-cache")
include=()
for f in "${first[@]}"; do include+=("--include=$f"); done
if ! mmdebstrap --mode=root --variant=minbase --dpkgopt=force-unsafe-io \
       --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
       "${include[@]}" "${cache_args[@]}" bookworm "$root" "${mirrors[@]}" \
       </dev/null >"$work/mmdebstrap.log" 2>&1; then
  tail -30 "$work/mmdebstrap.log"; echo "FAIL: mmdebstrap"; exit 1
fi
step "root ready"

in_root() { chroot "$root" "$@"; }
# dpkg inside the root, with /proc as on a real system (unmounted with the namespace).
dpkg_in_root() { unshare --mount --fork sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" dpkg "$@"' "$root" "$@"; }
# copy_in NAME DEB...: copies the files to /tmp/debs-NAME in the root; sets in_root_debs to their
# paths there (dpkg in the root gets no shell to expand a glob).
in_root_debs=()
copy_in() {
  local dir="/tmp/debs-$1" f; shift
  rm -rf "$root$dir"; mkdir -p "$root$dir"; cp "$@" "$root$dir/"
  in_root_debs=(); for f in "$@"; do in_root_debs+=("$dir/$(basename "$f")"); done
}
mode_owner() { stat -c '%a %U:%G' "$root$1" 2>/dev/null || echo missing; }
expect_mode() { local got; got="$(mode_owner "$1")"; [ "$got" = "$2" ] || bad "$1: $got, expected $2"; }
link_to() { [ "$(readlink "$root$1" 2>/dev/null)" = "$2" ] || bad "$1 is not a symlink to $2 ($(readlink "$root$1" 2>/dev/null || echo none))"; }
absent() { [ ! -e "$root$1" ] && [ ! -L "$root$1" ] || bad "$1 still exists"; }
status_of() { in_root dpkg-query -W -f='${db:Status-Abbrev}${Version}' "$1" 2>/dev/null || true; }

uid_of_ringside=""
check_user() {
  local pw gr sys_uid_max sys_gid_max
  pw="$(in_root getent passwd ringside || true)"; gr="$(in_root getent group ringside || true)"
  [ -n "$pw" ] || { bad "no user ringside"; return; }
  [ -n "$gr" ] || { bad "no group ringside"; return; }
  sys_uid_max="$(awk '$1 == "SYS_UID_MAX" {print $2}' "$root/etc/login.defs")"; sys_uid_max="${sys_uid_max:-999}"
  sys_gid_max="$(awk '$1 == "SYS_GID_MAX" {print $2}' "$root/etc/login.defs")"; sys_gid_max="${sys_gid_max:-999}"
  IFS=: read -r _ _ uid gid _ home shell <<<"$pw"
  [ "$uid" -ge 100 ] && [ "$uid" -le "$sys_uid_max" ] || bad "ringside uid $uid is not a system uid (100..$sys_uid_max)"
  [ "$(cut -d: -f3 <<<"$gr")" = "$gid" ] || bad "ringside's primary group is not group ringside ($pw / $gr)"
  [ "$gid" -le "$sys_gid_max" ] || bad "ringside gid $gid is not a system gid"
  # The plugin socket's group: its own, so that training users never get umad with it.
  local ng; ng="$(in_root getent group ringside-nccl || true)"
  [ -n "$ng" ] || bad "no group ringside-nccl (the plugin socket's)"
  [ -z "$ng" ] || [ "$(cut -d: -f3 <<<"$ng")" -le "$sys_gid_max" ] || bad "ringside-nccl is not a system group ($ng)"
  [ -z "$ng" ] || [ "$(cut -d: -f3 <<<"$ng")" != "$gid" ] || bad "ringside-nccl is group ringside"
  [ "$home" = /var/lib/ringside ] || bad "ringside home $home"
  case "$shell" in */nologin|*/false) ;; *) bad "ringside has a login shell: $shell" ;; esac
  [ -z "$uid_of_ringside" ] || [ "$uid" = "$uid_of_ringside" ] || bad "ringside uid changed: $uid_of_ringside -> $uid"
  uid_of_ringside="$uid"
}

check_installed() {  # $1: version
  local p
  for p in "${pkgs[@]}"; do
    [ "$(status_of "$p")" = "ii $1" ] || bad "$p: status '$(status_of "$p")', expected 'ii $1'"
  done
  check_user
  expect_mode /usr/bin/ringside-agent "755 root:root"
  expect_mode /usr/bin/ringside-aggregator "755 root:root"
  expect_mode /usr/bin/ringside "755 root:root"
  expect_mode /usr/lib/ringside/libringside_nccl.so "644 root:root"
  expect_mode /lib/systemd/system/ringside-agent.service "644 root:root"
  expect_mode /lib/systemd/system/ringside-collectives.socket "644 root:root"
  expect_mode /lib/systemd/system/ringside-aggregator.service "644 root:root"
  expect_mode /lib/udev/rules.d/60-ringside-umad.rules "644 root:root"
  expect_mode /usr/lib/sysusers.d/ringside.conf "644 root:root"
  expect_mode /etc/default/ringside-agent "644 root:root"
  expect_mode /etc/default/ringside-aggregator "644 root:root"
  for p in ringside-agent ringside-aggregator; do
    [[ "$(in_root dpkg-query -W -f='${Conffiles}' "$p")" == *" /etc/default/$p "* ]] ||
      bad "$p: /etc/default/$p is not a conffile"
  done
  # Every shipped file as packaged (dpkg --verify prints nothing when all match; conffiles, marked
  # "c", may carry the administrator's changes).
  local v; v="$(in_root dpkg --verify "${pkgs[@]}" 2>&1 | grep -v '^??5?????? c ' || true)"
  [ -z "$v" ] || bad "dpkg --verify: $v"
  # Enabled the way systemd would (symlinks) and as deb-systemd-helper records it.
  link_to /etc/systemd/system/multi-user.target.wants/ringside-agent.service /lib/systemd/system/ringside-agent.service
  link_to /etc/systemd/system/sockets.target.wants/ringside-collectives.socket /lib/systemd/system/ringside-collectives.socket
  absent /etc/systemd/system/ringside-agent.service   # not masked
  absent /etc/systemd/system/ringside-collectives.socket
  absent /etc/systemd/system/ringside-aggregator.service
  # The programs run inside the root.
  local out
  out="$(in_root /usr/bin/ringside --version 2>&1)" || bad "ringside --version failed: $out"
  [ "$out" = "ringside ${1%%-*}" ] || bad "ringside --version printed '$out'"
  for b in ringside-agent ringside-aggregator; do
    out="$(in_root /usr/bin/$b --version 2>&1)" || bad "$b --version failed: $out"
    [ "$out" = "$b ${1%%-*}" ] || bad "$b --version printed '$out'"
  done
  rm -rf "$root/srv/fixture"; mkdir -p "$root/srv/fixture"; cp -a "$fixture" "$root/srv/fixture/sys"
  out="$(in_root /usr/bin/ringside-agent --once -o json --sysfs-root=/srv/fixture/sys \
           --node-name=package-test --listen= 2>"$work/agent.err")" || { cat "$work/agent.err"; bad "ringside-agent --once failed"; }
  python3 - "$out" <<'PY' || bad "ringside-agent --once -o json: unexpected output"
import json, sys
series = json.loads(sys.argv[1])
assert len(series) > 20, len(series)
assert all(s["node"] == "package-test" for s in series)
# The fixture's saturated 32-bit counter (fixtures/README.md).
assert any(s["device"] == "mlx4_0" and s["port"] == "1" and s["counter"] == "port_xmit_wait"
           and s["value"] == 4294967295 for s in series), "mlx4_0 port_xmit_wait"
PY
}

step "check the fresh install"
expect_mode /etc/default/ringside-agent "644 root:root"
check_installed "$version"
link_to /etc/systemd/system/multi-user.target.wants/ringside-aggregator.service /lib/systemd/system/ringside-aggregator.service

# --- 2. Upgrade to a newer version: local changes survive: an edited conffile (no prompt, no
# .dpkg-dist), a disabled unit stays disabled; the user keeps its uid.
step "upgrade to $upgrade_version"
echo 'RINGSIDE_AGENT_ARGS="--interval=5s"  # local change' >> "$root/etc/default/ringside-agent"
in_root systemctl disable --quiet ringside-aggregator.service   # works on the files, no systemd running
absent /etc/systemd/system/multi-user.target.wants/ringside-aggregator.service
mkdir -p "$root/var/lib/ringside"; touch "$root/var/lib/ringside/state"   # as StateDirectory= would

# From here on the root looks booted to the maintainer scripts: /run/systemd/system and udevd's
# control socket exist, and systemctl, deb-systemd-invoke and udevadm are stand-ins (diverted
# with dpkg-divert) that log their arguments to /calls.log. So the tests below check what the
# scripts ask systemd and udev to do on upgrade, remove, purge and install (no service can really
# start in a chroot: systemd is not its init).
mkdir -p "$root/run/systemd/system" "$root/run/udev"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$root/run/udev/control"
# systemctl also passes every call on to the real one (deb-systemd-helper enables units with
# `systemctl preset` when systemctl exists; systemctl in a chroot edits files and ignores
# daemon-reload), deb-systemd-invoke and udevadm only log.
in_root dpkg-divert --quiet --local --rename --add /bin/systemctl
printf '#!/bin/sh\necho "systemctl $*" >> /calls.log\nexec /bin/systemctl.distrib "$@"\n' > "$root/bin/systemctl"
for f in /usr/bin/deb-systemd-invoke /usr/bin/udevadm; do
  in_root dpkg-divert --quiet --local --no-rename --add "$f"
  printf '#!/bin/sh\necho "%s $*" >> /calls.log\n' "$(basename "$f")" > "$root$f"
done
chmod 0755 "$root/bin/systemctl" "$root/usr/bin/deb-systemd-invoke" "$root/usr/bin/udevadm"
# expect_calls STEP LINE...: /calls.log holds each LINE (and is emptied for the next step).
expect_calls() {
  local what="$1" line; shift
  for line in "$@"; do
    grep -qxF "$line" "$root/calls.log" 2>/dev/null || bad "$what: the scripts did not call '$line' (calls: $(tr '\n' ';' < "$root/calls.log" 2>/dev/null))"
  done
  : > "$root/calls.log"
}
no_call() {  # no_call STEP PATTERN
  if grep -q -- "$2" "$root/calls.log" 2>/dev/null; then bad "$1: unexpected call: $(grep -- "$2" "$root/calls.log" | tr '\n' ';')"; fi
}
udev_reload=("udevadm control --reload-rules" "udevadm trigger --action=change --subsystem-match=infiniband_mad")
copy_in new "${second[@]}"
dpkg_in_root --force-confold -i "${in_root_debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; bad "dpkg -i (upgrade)"; }
check_installed "$upgrade_version"
grep -q 'local change' "$root/etc/default/ringside-agent" || bad "the upgrade lost the local change to /etc/default/ringside-agent"
find "$root/etc" -name '*.dpkg-*' | grep . && bad "conffile leftovers"
absent /etc/systemd/system/multi-user.target.wants/ringside-aggregator.service   # still disabled
[ -e "$root/var/lib/ringside/state" ] || bad "the upgrade removed /var/lib/ringside"
no_call upgrade "stop"
expect_calls upgrade "systemctl --system daemon-reload" \
  "deb-systemd-invoke restart ringside-agent.service ringside-collectives.socket" \
  "deb-systemd-invoke restart ringside-aggregator.service" "${udev_reload[@]}"

# --- 3. Reinstall the same version.
step "reinstall $upgrade_version"
dpkg_in_root -i "${in_root_debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; bad "dpkg -i (reinstall)"; }
check_installed "$upgrade_version"
no_call reinstall "stop"
expect_calls reinstall "deb-systemd-invoke restart ringside-agent.service ringside-collectives.socket"

# --- 4. Remove: programs go; conffiles, state and the account stay; units masked.
step "remove"
dpkg_in_root --remove "${pkgs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; bad "dpkg --remove"; }
for p in "${pkgs[@]}"; do
  # rc: config files left (agent, aggregator); un: nothing left (cli, plugin).
  case "$(status_of "$p")" in rc*|un*|"") ;; *) bad "$p after remove: $(status_of "$p")" ;; esac
done
for f in /usr/bin/ringside-agent /usr/bin/ringside-aggregator /usr/bin/ringside \
         /usr/lib/ringside/libringside_nccl.so /lib/systemd/system/ringside-agent.service \
         /lib/udev/rules.d/60-ringside-umad.rules; do absent "$f"; done
[ -e "$root/etc/default/ringside-agent" ] || bad "remove deleted the conffile"
[ -e "$root/var/lib/ringside/state" ] || bad "remove deleted /var/lib/ringside"
link_to /etc/systemd/system/ringside-agent.service /dev/null
in_root getent passwd ringside >/dev/null || bad "remove deleted the user"
expect_calls remove "deb-systemd-invoke stop ringside-agent.service ringside-collectives.socket" \
  "deb-systemd-invoke stop ringside-aggregator.service" "systemctl --system daemon-reload" "${udev_reload[@]}"

# --- 5. Purge: conffiles, enablement state, masks and state go; the account stays (policy).
step "purge"
dpkg_in_root --purge "${pkgs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; bad "dpkg --purge"; }
for p in "${pkgs[@]}"; do [ -z "$(status_of "$p")" ] || [ "$(status_of "$p")" = "un " ] || bad "$p after purge: $(status_of "$p")"; done
absent /etc/default/ringside-agent
absent /etc/default/ringside-aggregator
absent /var/lib/ringside
left="$(find "$root/etc/systemd" "$root/var/lib/systemd/deb-systemd-helper-enabled" \
          "$root/var/lib/systemd/deb-systemd-helper-masked" -name '*ringside*' 2>/dev/null || true)"
[ -z "$left" ] || bad "left after purge: $left"
in_root getent passwd ringside >/dev/null || bad "purge deleted the system user (Debian keeps it)"
no_call purge "deb-systemd-invoke"

# --- 6. Install again after the purge: enabled again, same account.
step "install $version after the purge"
copy_in first "${first[@]}"
dpkg_in_root -i "${in_root_debs[@]}" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; bad "dpkg -i (after purge)"; }
check_installed "$version"
link_to /etc/systemd/system/multi-user.target.wants/ringside-aggregator.service /lib/systemd/system/ringside-aggregator.service
no_call "install after purge" "restart"
expect_calls "install after purge" "deb-systemd-invoke start ringside-agent.service ringside-collectives.socket" \
  "deb-systemd-invoke start ringside-aggregator.service" "${udev_reload[@]}"

step "done"
rm -rf "$newer"
echo "deploy_package_install: $((SECONDS - start)) s"
exit $fail
