# shellcheck shell=bash
# Shared by deploy/image/build.sh and tests/deploy/package_install_test.sh (sourced, not run).
#
# ringside_debian_mirrors: the Debian 12 apt sources to bootstrap from, one "deb URI SUITE COMPONENT"
#   line each: $RINGSIDE_DEBIAN_SOURCES (lines separated by newlines or ';') if set, else the
#   bookworm* repositories this machine's apt is configured with (so the same mirror, proxy-free
#   path and security updates as the host that built the packages), else deb.debian.org.
# ringside_cache_args DIR [HOOK]: mmdebstrap hooks that reuse the .deb files in DIR (copied into the new
#   root's apt cache before the download) and add the ones downloaded this time (after the
#   install, in the HOOK step: customize (default), or extract for the extract variant), under a lock so concurrent builds can share DIR. Saves the download, not the install.

ringside_debian_mirrors() {
  if [ -n "${RINGSIDE_DEBIAN_SOURCES:-}" ]; then
    printf '%s\n' "$RINGSIDE_DEBIAN_SOURCES" | tr ';' '\n' | sed '/^[[:space:]]*$/d'
    return
  fi
  local lines
  # shellcheck disable=SC2016 # apt expands $(...) in the format
  lines="$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
             'Created-By: Packages' 2>/dev/null |
           awk '$2 ~ /^bookworm(-updates|-security)?$/ && $3 == "main" { print "deb " $0 }' |
           sort -u)"
  if [ -n "$lines" ]; then
    printf '%s\n' "$lines"
  else
    printf '%s\n' "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main"
  fi
}

ringside_cache_args() {
  local cache="$1" hook="${2:-customize}"
  mkdir -p "$cache"
  # --skip=essential/unlink: keep the Essential packages' downloads until the customize hook.
  printf '%s\n' --skip=essential/unlink \
    "--setup-hook=mkdir -p \"\$1/var/cache/apt/archives\" && flock '$cache/.lock' find '$cache' -maxdepth 1 -name '*.deb' -exec cp -t \"\$1/var/cache/apt/archives/\" {} +" \
    "--$hook-hook=flock '$cache/.lock' find \"\$1/var/cache/apt/archives\" -maxdepth 1 -name '*.deb' ! -name 'ringside*' -exec cp -n -t '$cache/' {} +"
}
