#!/usr/bin/env bash
# Offline checks of what ringside installs for systemd and udev (deploy/systemd, deploy/default,
# deploy/udev), run by ctest (tests/deploy/systemd.cmake):
#
#   systemd_units_test.sh verify         SRC AGENT_BIN AGGREGATOR_BIN
#   systemd_units_test.sh security-agent SRC AGENT_BIN AGGREGATOR_BIN
#   systemd_units_test.sh security-aggregator SRC AGENT_BIN AGGREGATOR_BIN
#   systemd_units_test.sh agent-needs    SRC
#   systemd_units_test.sh default-files  SRC AGENT_BIN AGGREGATOR_BIN
#   systemd_units_test.sh udev           SRC
#   systemd_units_test.sh sandbox        SRC AGENT_BIN AGGREGATOR_BIN
#
# SRC is the source tree; *_BIN the built binaries, which stand in for /usr/bin/ringside-* in
# temporary copies of the units (systemd-analyze verify wants ExecStart= to exist); nothing else
# in the copies changes, and that is checked. Exit 0: pass; 1: fail, with the reason on stderr;
# 77: skipped (no systemd-analyze).
set -uo pipefail

check="${1:-}"
src="${2:-}"
agent_bin="${3:-}"
aggregator_bin="${4:-}"
units_dir="$src/deploy/systemd"

# Exposure gates on systemd-analyze's 0-100 scale (the printed 1.5 is 15): peers score 92-96.
readonly kAgentThreshold=20
readonly kAggregatorThreshold=15

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

need_systemd_analyze() {
  if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "SKIP: systemd-analyze is not installed (Debian package systemd)"
    exit 77
  fi
}

need_binaries() {
  local b
  for b in "$agent_bin" "$aggregator_bin"; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then
      echo "FAIL: built binary '$b' is missing: build targets ringside-agent and ringside-aggregator" >&2
      exit 1
    fi
  done
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# stage DIR: the three units in DIR, ExecStart= pointing at the built binaries (through symlinks
# named like the installed ones), every other line as shipped.
stage() {
  local dir="$1" unit bin installed
  mkdir -p "$dir" "$tmp/bin"
  ln -sf "$(realpath "$agent_bin")" "$tmp/bin/ringside-agent"
  ln -sf "$(realpath "$aggregator_bin")" "$tmp/bin/ringside-aggregator"
  for unit in ringside-agent.service ringside-aggregator.service ringside-collectives.socket; do
    if [ ! -f "$units_dir/$unit" ]; then
      fail "$units_dir/$unit is missing"
      continue
    fi
    sed "s#^ExecStart=/usr/bin/\(ringside-[a-z]*\)#ExecStart=$tmp/bin/\1#" "$units_dir/$unit" >"$dir/$unit"
    # The copy may differ from the original only in ExecStart's program.
    local changed
    changed="$(diff "$units_dir/$unit" "$dir/$unit" | grep -c '^[<>]')"
    case "$unit" in
      *.service)
        installed="/usr/bin/${unit%.service}"
        if ! grep -q "^ExecStart=$installed " "$units_dir/$unit"; then
          fail "$unit: ExecStart= does not run $installed"
        fi
        [ "$changed" = 2 ] || fail "$unit: staging changed $changed lines, expected only ExecStart="
        ;;
      *) [ "$changed" = 0 ] || fail "$unit: staging changed $changed lines, expected none" ;;
    esac
  done
}

# add_dropins DIR: the example drop-ins of deploy/systemd/*.service.d/*.conf.example, installed.
add_dropins() {
  local dir="$1" d f
  for d in "$units_dir"/*.service.d; do
    [ -d "$d" ] || continue
    mkdir -p "$dir/$(basename "$d")"
    for f in "$d"/*.conf.example; do
      cp "$f" "$dir/$(basename "$d")/$(basename "$f" .example)"
    done
  done
}

# verify DIR LABEL: systemd-analyze verify on every unit in DIR. It exits 0 on unknown keys and
# unparsable values (it only logs them), so any output is a failure too.
verify_dir() {
  local dir="$1" label="$2" out rc
  out="$(cd "$dir" && systemd-analyze verify --man=no ./*.service ./*.socket 2>&1)"
  rc=$?
  if [ $rc -ne 0 ] || [ -n "$out" ]; then
    fail "systemd-analyze verify ($label) exited $rc:"$'\n'"$out"
  else
    echo "ok: systemd-analyze verify --man=no ($label): $(cd "$dir" && ls ./*.service ./*.socket | tr '\n' ' ')"
  fi
}

do_verify() {
  need_systemd_analyze
  need_binaries
  stage "$tmp/plain"
  verify_dir "$tmp/plain" "units as shipped"
  stage "$tmp/dropins"
  add_dropins "$tmp/dropins"
  verify_dir "$tmp/dropins" "with the example drop-ins: $(cd "$tmp/dropins" && ls -d ./*.d/* | tr '\n' ' ')"
  # The check itself must be able to fail on this systemd: a misspelt key and a bad Service=.
  stage "$tmp/broken"
  sed -i 's/^ProtectHome=yes/ProtectHome=yes\nProtectHomee=yes/' "$tmp/broken/ringside-agent.service"
  sed -i 's/^Service=.*/Service=ringside-agnet.service/' "$tmp/broken/ringside-collectives.socket"
  local out
  out="$(cd "$tmp/broken" && systemd-analyze verify --man=no ./*.service ./*.socket 2>&1)"
  if ! grep -q "ProtectHomee" <<<"$out" || ! grep -q "ringside-agnet.service" <<<"$out"; then
    fail "systemd-analyze verify did not report a misspelt key and a wrong Service= (this check would miss them):"$'\n'"$out"
  fi
}

# security DIR UNIT THRESHOLD: the offline exposure score must be at most THRESHOLD/10.
security() {
  local dir="$1" unit="$2" threshold="$3" label="$4" out rc score tenths
  out="$(cd "$dir" && systemd-analyze security --offline=yes --threshold="$threshold" "./$unit" 2>&1)"
  rc=$?
  score="$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9]*\.[0-9]\).*/\1/p' <<<"$out")"
  if [ -z "$score" ]; then
    fail "$unit ($label): no 'Overall exposure level' in systemd-analyze security output (exit $rc):"$'\n'"$out"
    return
  fi
  tenths=$((10#${score%.*} * 10 + 10#${score#*.}))
  echo "$unit ($label): exposure $score (gate $((threshold / 10)).$((threshold % 10))); still exposed:"
  grep '✗' <<<"$out" | sed 's/  */ /g; s/^/  /'
  if [ $rc -ne 0 ] || [ "$tenths" -gt "$threshold" ]; then
    fail "$unit ($label): exposure $score is above $((threshold / 10)).$((threshold % 10)) (systemd-analyze exit $rc)"
    return
  fi
  # The gate is real: one step below the score must fail (threshold is on the 0-100 scale).
  if [ "$tenths" -gt 0 ] &&
    (cd "$dir" && systemd-analyze security --offline=yes --threshold=$((tenths - 1)) "./$unit" >/dev/null 2>&1); then
    fail "$unit ($label): --threshold=$((tenths - 1)) passed at exposure $score; the threshold does not gate"
  fi
}

do_security() {
  local unit="$1" threshold="$2"
  need_systemd_analyze
  need_binaries
  stage "$tmp/plain"
  security "$tmp/plain" "$unit" "$threshold" "as shipped"
  stage "$tmp/dropins"
  add_dropins "$tmp/dropins"
  if [ -d "$tmp/dropins/$unit.d" ]; then
    security "$tmp/dropins" "$unit" "$threshold" "with $(cd "$tmp/dropins/$unit.d" && ls | tr '\n' ' ')"
  fi
}

# The agent's unit keeps what the agent needs: a higher score bought by hiding its devices or the
# host network would pass the gate and break the agent.
do_agent_needs() {
  local u="$units_dir/ringside-agent.service" s="$units_dir/ringside-collectives.socket" line
  for line in 'Type=notify' 'NotifyAccess=main' 'User=ringside' 'Group=ringside' \
    'Requires=ringside-collectives.socket' 'After=ringside-collectives.socket' \
    'DeviceAllow=char-infiniband_mad rw' 'DeviceAllow=char-infiniband_verbs rw' \
    'DeviceAllow=char-nvidia* rw' 'DevicePolicy=closed' 'CapabilityBoundingSet=' 'AmbientCapabilities=' \
    'RestrictAddressFamilies=AF_UNIX AF_NETLINK AF_INET AF_INET6' \
    'EnvironmentFile=-/etc/default/ringside-agent'; do
    grep -Fqx "$line" "$u" || fail "ringside-agent.service: no line '$line'"
  done
  grep -q '^WatchdogSec=[1-9]' "$u" || fail "ringside-agent.service: no WatchdogSec="
  grep -q '^TimeoutStopSec=[1-9]' "$u" || fail "ringside-agent.service: no TimeoutStopSec="
  # One descriptor per polled counter file: far more than the default soft limit of 1024.
  local nofile
  for f in "$u" "$units_dir/ringside-aggregator.service"; do
    nofile="$(sed -n 's/^LimitNOFILE=\([0-9]*\)$/\1/p' "$f")"
    [ -n "$nofile" ] && [ "$nofile" -ge 16384 ] ||
      fail "$(basename "$f"): LimitNOFILE='$nofile', want a number of at least 16384"
  done
  for line in 'PrivateDevices=yes' 'PrivateNetwork=yes' 'ProcSubset=pid' 'PrivateUsers=yes' \
    'DynamicUser=yes' 'RuntimeDirectory=.*'; do
    ! grep -qx "$line" "$u" || fail "ringside-agent.service: '$line' (see docs/privileges.md)"
  done
  for line in 'ListenStream=/run/ringside/collectives.sock' 'FileDescriptorName=collectives' \
    'SocketMode=0660' 'SocketUser=ringside' 'SocketGroup=ringside-nccl' 'DirectoryMode=0755' \
    'Service=ringside-agent.service' 'WantedBy=sockets.target'; do
    grep -Fqx "$line" "$s" || fail "ringside-collectives.socket: no line '$line'"
  done
  # The plugin's default socket path is the agent's default and the socket unit's.
  grep -q '"/run/ringside/collectives.sock"' "$src/daemon/agent/main.cc" ||
    fail "daemon/agent/main.cc: --collectives-socket default is not /run/ringside/collectives.sock"
  [ $failures -eq 0 ] && echo "ok: ringside-agent.service and ringside-collectives.socket grant what the agent needs"
}

# /etc/default files: comments and exactly one assignment (`value`, as packaged); every flag in
# it and in the commented examples is a flag of the binary.
default_file() {
  local file="$1" var="$2" bin="$3" value="$4" lines flags f help
  [ -f "$file" ] || { fail "$file is missing"; return; }
  lines="$(grep -v '^[[:space:]]*#' "$file" | grep -v '^[[:space:]]*$')"
  [ "$lines" = "$var=\"$value\"" ] || fail "$file: expected only '$var=\"$value\"' outside comments, got:"$'\n'"$lines"
  grep -q "^#$var=\"--" "$file" || fail "$file: no commented example of $var"
  help="$("$bin" --helpfull 2>&1)"
  flags="$(grep "^#\?$var=" "$file" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)"
  for f in $flags; do
    f="${f#--}"
    grep -q -- "--${f//-/_} " <<<"$help" || fail "$file: example flag --$f is not a flag of $(basename "$bin")"
  done
  [ $failures -eq 0 ] && echo "ok: $file ($(wc -w <<<"$flags") example flags known to $(basename "$bin"))"
}

do_default_files() {
  need_binaries
  default_file "$src/deploy/default/ringside-agent" RINGSIDE_AGENT_ARGS "$agent_bin" ""
  # Loopback until TLS is configured: plaintext off loopback is refused, and the unit must start.
  default_file "$src/deploy/default/ringside-aggregator" RINGSIDE_AGGREGATOR_ARGS "$aggregator_bin" \
    "--listen=127.0.0.1:9472"
  grep -q '^EnvironmentFile=-/etc/default/ringside-aggregator$' "$units_dir/ringside-aggregator.service" ||
    fail "ringside-aggregator.service does not read /etc/default/ringside-aggregator"
  grep -q '^ExecStart=/usr/bin/ringside-aggregator .*\$RINGSIDE_AGGREGATOR_ARGS$' "$units_dir/ringside-aggregator.service" ||
    fail "ringside-aggregator.service does not pass \$RINGSIDE_AGGREGATOR_ARGS"
  grep -q '^ExecStart=/usr/bin/ringside-agent \$RINGSIDE_AGENT_ARGS$' "$units_dir/ringside-agent.service" ||
    fail "ringside-agent.service does not pass \$RINGSIDE_AGENT_ARGS"
}

# The udev rule, parsed the way udev reads a rule line: comma-separated KEY[{attr}]OP"value".
# (Debian 12's udevadm has no `verify`; `udevadm test` needs a real umad device.)
do_udev() {
  local file="$src/deploy/udev/60-ringside-umad.rules" rules tok key op val got
  [ -f "$file" ] || { fail "$file is missing"; exit 1; }
  rules="$(grep -v '^[[:space:]]*#' "$file" | grep -v '^[[:space:]]*$')"
  [ "$(wc -l <<<"$rules")" = 1 ] || fail "$file: expected one rule line, got:"$'\n'"$rules"
  local -a want=('SUBSYSTEM=="infiniband_mad"' 'KERNEL=="umad*"' 'GROUP="ringside"' 'MODE="0660"')
  local -a have=()
  local rest="$rules"
  # KEY or KEY{attr}, operator, "value", then a comma or the end of the line.
  local kRuleToken='^[[:space:]]*([A-Z_]+)(\{[^}]*\})?[[:space:]]*(==|!=|\+=|-=|:=|=)[[:space:]]*"([^"]*)"[[:space:]]*(,|$)(.*)$'
  while [ -n "$rest" ]; do
    if [[ "$rest" =~ $kRuleToken ]]; then
      key="${BASH_REMATCH[1]}${BASH_REMATCH[2]}"
      op="${BASH_REMATCH[3]}"
      val="${BASH_REMATCH[4]}"
      rest="${BASH_REMATCH[6]}"
      case "${BASH_REMATCH[1]}" in
        SUBSYSTEM | KERNEL) [ "$op" = "==" ] || fail "$file: $key uses '$op', a match key needs '=='" ;;
        GROUP | MODE | OWNER) [[ "$op" == "=" || "$op" == ":=" ]] || fail "$file: $key uses '$op'" ;;
        *) fail "$file: unexpected key $key" ;;
      esac
      have+=("$key$op\"$val\"")
    else
      fail "$file: cannot parse '$rest' as KEY==\"value\" or KEY=\"value\""
      break
    fi
  done
  got="$(printf '%s\n' "${have[@]}" | sort)"
  [ "$got" = "$(printf '%s\n' "${want[@]}" | sort)" ] ||
    fail "$file: the rule is"$'\n'"$got"$'\n'"expected exactly"$'\n'"$(printf '%s\n' "${want[@]}" | sort)"
  # Not world-accessible, and never the issm (SM) nodes.
  grep -q 'MODE="0660"' <<<"$rules" || fail "$file: mode must be 0660"
  grep -q 'issm' <<<"$rules" && fail "$file: must not match issm*"
  # The group the rule names is the agent's group.
  grep -qx 'Group=ringside' "$units_dir/ringside-agent.service" ||
    fail "ringside-agent.service does not run as group ringside, the udev rule's GROUP"
  [ $failures -eq 0 ] && echo "ok: $file: ${have[*]}"
}

# The built programs run under the units' seccomp settings (systemd_sandbox_test.py).
do_sandbox() {
  need_systemd_analyze
  need_binaries
  if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed (Debian package python3)"
    exit 77
  fi
  python3 "$(dirname "$0")/systemd_sandbox_test.py" "$src" "$agent_bin" "$aggregator_bin"
  exit $?
}

case "$check" in
  verify) do_verify ;;
  sandbox) do_sandbox ;;
  security-agent) do_security ringside-agent.service "$kAgentThreshold" ;;
  security-aggregator) do_security ringside-aggregator.service "$kAggregatorThreshold" ;;
  agent-needs) do_agent_needs ;;
  default-files) do_default_files ;;
  udev) do_udev ;;
  *)
    echo "usage: $0 verify|security-agent|security-aggregator|agent-needs|default-files|udev|sandbox SRC [AGENT_BIN AGGREGATOR_BIN]" >&2
    exit 2
    ;;
esac
[ $failures -eq 0 ] || exit 1
exit 0
