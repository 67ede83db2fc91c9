#!/usr/bin/env bash
# ctest deploy_package_contents (tests/deploy/packaging.cmake), the fixture that builds the .deb
# files the install and image tests use. No root needed.
#   package_contents_test.sh BUILD_DIR OUT_DIR
# Runs cpack on the built binaries into OUT_DIR (stripped, without the -dbgsym packages, which only
# cost time here), then checks each package as dpkg-deb shows it: the exact file list with modes
# and owners, conffiles, maintainer scripts, stripped binaries, and that Depends names the Debian
# package of every shared library each ELF file needs (and, for the NCCL plugin, nothing but libc).
set -euo pipefail
build="$(cd "$1" && pwd)"; out="$2"
start=$SECONDS
fail=0
bad() { echo "FAIL: $*"; fail=1; }

rm -rf "$out"; mkdir -p "$out"
if ! (cd "$build" && cpack -G DEB --config CPackConfig.cmake -B "$out" \
        -D CPACK_DEBIAN_DEBUGINFO_PACKAGE=OFF -D CPACK_STRIP_FILES=ON >"$out/cpack.log" 2>&1); then
  cat "$out/cpack.log"; echo "FAIL: cpack"; exit 1
fi
mapfile -t debs < <(cd "$out" && find . -maxdepth 1 -name '*.deb' -printf '%f\n' | sort)
echo "packages: ${debs[*]}"
[ "${#debs[@]}" -eq 4 ] || bad "expected 4 .deb files, got ${#debs[@]}"

# Expected contents: "mode owner path" per regular file or symlink (directories not listed).
# shellcheck disable=SC2317 # all four are called as expect_"$name"
{
expect_ringside-agent() { cat <<'L'
-rw-r--r-- root/root ./etc/default/ringside-agent
-rw-r--r-- root/root ./lib/systemd/system/ringside-agent.service
-rw-r--r-- root/root ./lib/systemd/system/ringside-collectives.socket
-rw-r--r-- root/root ./lib/udev/rules.d/60-ringside-umad.rules
-rwxr-xr-x root/root ./usr/bin/ringside-agent
-rw-r--r-- root/root ./usr/lib/ringside/agent/libringside-civetweb-crypto.so
-rw-r--r-- root/root ./usr/lib/ringside/agent/libringside-civetweb-ssl.so
-rw-r--r-- root/root ./usr/lib/sysusers.d/ringside.conf
L
}
expect_ringside-aggregator() { cat <<'L'
-rw-r--r-- root/root ./etc/default/ringside-aggregator
-rw-r--r-- root/root ./lib/systemd/system/ringside-aggregator.service
-rwxr-xr-x root/root ./usr/bin/ringside-aggregator
-rw-r--r-- root/root ./usr/lib/ringside/aggregator/libringside-civetweb-crypto.so
-rw-r--r-- root/root ./usr/lib/ringside/aggregator/libringside-civetweb-ssl.so
L
}
expect_ringside-cli() { echo "-rwxr-xr-x root/root ./usr/bin/ringside"; }
expect_ringside-nccl-plugin() { echo "-rw-r--r-- root/root ./usr/lib/ringside/libringside_nccl.so"; }
}

for name in ringside-agent ringside-aggregator ringside-cli ringside-nccl-plugin; do
  deb="$(find "$out" -maxdepth 1 -name "${name}_*_amd64.deb" -print -quit)"
  [ -n "$deb" ] || { bad "$name: no ${name}_*_amd64.deb"; continue; }
  [ "$(dpkg-deb -f "$deb" Package)" = "$name" ] || bad "$name: Package field"
  # Files: everything expected is there, with its mode and owner; nothing else but docs.
  actual="$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print $1, $2, $6}' | grep -v ' ./usr/share/doc/' | sort)"
  wanted="$(expect_"$name" | sort)"
  if [ "$actual" != "$wanted" ]; then
    bad "$name: contents differ (- expected, + actual):"
    diff <(echo "$wanted") <(echo "$actual") || true
  fi
  # Control: conffiles and maintainer scripts.
  ctl="$out/ctl-$name"; rm -rf "$ctl"; dpkg-deb -e "$deb" "$ctl"
  case "$name" in
    ringside-agent|ringside-aggregator)
      [ "$(cat "$ctl/conffiles" 2>/dev/null)" = "/etc/default/$name" ] ||
        bad "$name: conffiles is '$(cat "$ctl/conffiles" 2>/dev/null)'"
      for s in postinst prerm postrm; do
        [ -f "$ctl/$s" ] || { bad "$name: no $s"; continue; }
        [ "$(stat -c %a "$ctl/$s")" = 755 ] || bad "$name: $s mode $(stat -c %a "$ctl/$s")"
        sh -n "$ctl/$s" || bad "$name: $s is not valid sh"
      done ;;
    *)
      for s in conffiles prerm; do [ ! -e "$ctl/$s" ] || bad "$name: unexpected $s"; done
      # CPack adds `ldconfig` to postinst/postrm of a package with a .so under /usr/lib/*/;
      # pointless for the plugin's private folder, and harmless. Nothing else is allowed.
      for s in postinst postrm; do
        # shellcheck disable=SC2016 # literal $1 in the patterns
        [ ! -e "$ctl/$s" ] || [ "$(grep -v -e '^#!' -e '^set -e$' -e '^if \[ "$1" = "\(configure\|remove\)" \]; then$' \
          -e '^[[:space:]]*ldconfig$' -e '^fi$' -e '^$' "$ctl/$s")" = "" ] || bad "$name: $s does more than ldconfig"
      done ;;
  esac
  # ELF files: stripped, and every NEEDED library's Debian package is in Depends.
  depends="$(dpkg-deb -f "$deb" Depends)"
  dep_names=" $(echo "$depends" | tr ',|' '\n' | sed 's/(.*//; s/[[:space:]]//g' | tr '\n' ' ') "
  x="$out/x-$name"; rm -rf "$x"; dpkg-deb -x "$deb" "$x"
  while IFS= read -r elf; do
    if readelf -S "$elf" | grep -q '\.debug_info'; then bad "$name: ${elf#"$x"} is not stripped"; fi
    for lib in $(readelf -d "$elf" | awk '/NEEDED/ {gsub(/[][]/, "", $5); print $5}'); do
      path="$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !n++ {print $NF}')"
      [ -n "$path" ] || { bad "$name: $lib not found on this machine"; continue; }
      # dpkg knows a library by the path its package ships (merged /usr: either spelling).
      pkg=""
      for p in "$path" "$(readlink -f "$path")" "$(dirname "$path")/$(readlink "$path")"; do
        pkg="$(dpkg -S "$p" 2>/dev/null | sed -n '1s/:.*//p' || true)"
        [ -z "$pkg" ] || break
      done
      case "$dep_names" in *" $pkg "*) ;; *) bad "$name: ${elf#"$x"} needs $lib ($pkg), not in Depends: $depends" ;; esac
    done
  done < <(find "$x" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
  echo "$name $(dpkg-deb -f "$deb" Version): Depends: $depends"
done

# The plugin is loaded into training processes: libc only.
plugin_deps="$(dpkg-deb -f "$out"/ringside-nccl-plugin_*.deb Depends)"
[[ "$plugin_deps" =~ ^libc6\ \(\>=\ [0-9.]+\)$ ]] || bad "ringside-nccl-plugin Depends: $plugin_deps (libc6 only)"
needed="$(readelf -d "$out/x-ringside-nccl-plugin/usr/lib/ringside/libringside_nccl.so" | awk '/NEEDED/ {print $5}' | tr '\n' ' ')"
[ "$needed" = "[libc.so.6] " ] || bad "libringside_nccl.so NEEDED: $needed (libc.so.6 only)"
# What the agent's maintainer scripts call, besides the shared libraries.
case "$(dpkg-deb -f "$out"/ringside-agent_*.deb Depends)" in
  "systemd | systemd-standalone-sysusers | systemd-sysusers, "*) ;;
  *) bad "ringside-agent Depends lacks the systemd-sysusers alternatives first" ;;
esac

echo "deploy_package_contents: $((SECONDS - start)) s"
exit $fail
