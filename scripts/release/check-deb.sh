#!/usr/bin/env bash
# Builds the Debian packages (scripts/release/package-deb.sh) and checks them:
#
# 1. lintian on each: any error fails; the warnings are printed.
# 2. Each package's binary, extracted with dpkg-deb -x, answers real
#    requests (scripts/release/smoke.sh): natively for amd64, under qemu-user for
#    arm64 and armhf (armhf with -cpu arm1176, an ARMv6 Pi's CPU); its
#    /etc/default/plantstore names every flag of its --help, and its bash
#    completion completes them.
# 3. The amd64 package on this machine, as an administrator would use it
#    (systemd does not run here, so the unit's ExecStart line is run by
#    hand as the plantstore user, with the unit's EnvironmentFile and
#    STATE_DIRECTORY): dpkg -i makes the user, the directories and the
#    token with their modes; the service answers /healthz and a POST; a
#    newer version installed over it keeps the plant, the token and an
#    edited /etc/default/plantstore; dpkg -r keeps the data and the token;
#    dpkg -P removes them; systemd-analyze verify passes on the installed
#    unit.
# 4. docs/raspberry-pi.md's own commands, read from the page (the blocks
#    after its "<!-- check-deb: NAME -->" lines), so that the page and
#    this check cannot drift apart: the command that starts the service
#    without systemd serves the plant with the token file's token, reading
#    the settings file as the page says to write it (quotes, an & in
#    single quotes); the line that turns on the local CA (--tls-auto)
#    makes one whose /ca.pem has the fingerprint the log gives and, trusted
#    alone, is trusted by curl --cacert at every URL the server lists and
#    at the names the install prints, as is the HTTPS recipe's certificate; purge keeps that certificate and key (files the package did
#    not make) and removes /etc/plantstore only once nothing else is in it.
#
#   scripts/release/check-deb.sh [ARCH...]
#
# ARCH picks some of amd64, arm64, armhf for 1 and 2 (default: all three,
# as CI runs it); amd64 is always among them, for 3 and 4.
#
# Needs root (or sudo): it installs and removes the package, and makes
# and removes the plantstore user. It refuses to run where the package is
# installed or a plantstore user or /etc/plantstore exists already.
set -euo pipefail
cd "$(dirname "$0")/../.."

ARCHS=("$@")
[ ${#ARCHS[@]} -gt 0 ] || ARCHS=(amd64 arm64 armhf)
[[ " ${ARCHS[*]} " == *" amd64 "* ]] || ARCHS=(amd64 "${ARCHS[@]}")

SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
need=()
command -v lintian >/dev/null || need+=(lintian)
command -v systemd-analyze >/dev/null || need+=(systemd)
[ ${#need[@]} -eq 0 ] || scripts/apt-install.sh "${need[@]}" >&2

if dpkg-query -W -f '${Status}' plantstore 2>/dev/null | grep -q installed; then
  echo "the plantstore package is installed here: not touching it" >&2
  exit 1
fi
if getent passwd plantstore >/dev/null || getent group plantstore >/dev/null; then
  echo "a plantstore user or group exists here: remove it first (userdel plantstore)" >&2
  exit 1
fi
# Purge keeps what the administrator put in /etc/plantstore; what is there
# when this ends is this script's (the HTTPS recipe's files), removed.
if [ -e /etc/plantstore ]; then
  echo "/etc/plantstore exists here: not touching it" >&2
  exit 1
fi

base=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
V1=$base-1
V2=$base-1+check
WORK=$(mktemp -d)
PID=
# Where systemd runs, the package would start its service (on port 8080,
# holding the journal): a policy-rc.d that answers 101 keeps it from
# starting while this runs, as scripts/apt-install.sh does.
policy=/usr/sbin/policy-rc.d
added_policy=
cleanup() {
  $SUDO pkill -TERM -u plantstore -x plantstore 2>/dev/null || true
  if [ -n "$PID" ]; then wait "$PID" 2>/dev/null || true; fi
  status=$(dpkg-query -W -f '${db:Status-Status}' plantstore 2>/dev/null || true)
  if [ -n "$status" ] && [ "$status" != not-installed ]; then
    $SUDO dpkg -P plantstore >/dev/null || true
  fi
  getent passwd plantstore >/dev/null && $SUDO userdel plantstore
  getent group plantstore >/dev/null && $SUDO groupdel plantstore
  $SUDO rm -rf /etc/plantstore
  [ -z "$added_policy" ] || $SUDO rm -f "$policy"
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  added_policy=1
fi

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The packages, copied aside: cargo-deb replaces a package of the same
# architecture.
mkdir "$WORK/debs"
# (tee to a process, not to /dev/stderr: opening that path truncates a log
# file that stderr is redirected to, and CI's log lost every step before.)
scripts/release/package-deb.sh --version "$V1" --arch "$(IFS=,; echo "${ARCHS[*]}")" | tee >(cat >&2) |
  cut -d' ' -f3 | xargs -I{} cp {} "$WORK/debs/"
scripts/release/package-deb.sh --version "$V2" --arch amd64 | cut -d' ' -f3 | xargs -I{} cp {} "$WORK/debs/"
deb() { echo "$WORK/debs/plantstore_$1_$2.deb"; }

# 1. lintian, 2. the binary each package carries.
for arch in "${ARCHS[@]}"; do
  pkg=$(deb "$V1" "$arch")
  echo "== $pkg: lintian" >&2
  rc=0
  out=$(lintian "$pkg" 2>&1) || rc=$?
  out=$(grep -v "^N:\|running with root privileges" <<<"$out" || true)
  [ -z "$out" ] || echo "$out" >&2
  [ "$rc" -le 1 ] || fail "lintian failed on $pkg (exit $rc)"
  if grep -q "^E:" <<<"$out"; then fail "lintian reports errors for $pkg"; fi
  mkdir "$WORK/$arch"
  dpkg-deb -x "$pkg" "$WORK/$arch"
  case $arch in
    amd64) target=x86_64-unknown-linux-gnu ;;
    arm64) target=aarch64-unknown-linux-gnu ;;
    armhf) target=arm-unknown-linux-musleabihf ;;
  esac
  scripts/release/smoke.sh "$target" "$WORK/$arch/usr/bin/plantstore"
done

# The settings file names every flag the binary takes (commented where
# optional), so that an administrator finds them all in one place.
missing=$("$WORK/amd64/usr/bin/plantstore" --help | grep -oE '^  --[a-z-]+' | sed 's/^  --//' |
  grep -vx 'help\|version' | while read -r flag; do
    var=PLANTSTORE_$(tr 'a-z-' 'A-Z_' <<<"$flag")
    grep -qE "^#?$var=" "$WORK/amd64/etc/default/plantstore" || echo "$var"
  done)
[ -z "$missing" ] || fail "/etc/default/plantstore lacks $missing"

# bash completes the flags with the package's completions; the zsh and
# fish ones name them too.
completions=$WORK/amd64/usr/share
got=$(bash -c 'source "$1"; COMP_WORDS=(plantstore --tls-c); COMP_CWORD=1; _plantstore; echo "${COMPREPLY[*]}"' \
  _ "$completions/bash-completion/completions/plantstore")
[ "$got" = --tls-cert ] || fail "bash completes 'plantstore --tls-c' as '$got'"
for file in zsh/vendor-completions/_plantstore fish/vendor_completions.d/plantstore.fish; do
  grep -q -- tls-cert "$completions/$file" || fail "$file does not name --tls-cert"
done

# 3. Install, use, upgrade, remove, purge.
mode_of() { stat -c '%a %U:%G' "$1"; }
expect_mode() {
  local got
  got=$(mode_of "$1")
  [ "$got" = "$2" ] || fail "$1 is $got, expected $2"
  echo "   $1: $got" >&2
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Runs the installed unit's ExecStart as systemd would: as its User=, with
# its EnvironmentFile= (KEY=VALUE lines) and STATE_DIRECTORY, and no other
# environment.
unit=/usr/lib/systemd/system/plantstore.service
start_service() {
  local exec user envfile
  exec=$(sed -n 's/^ExecStart=//p' "$unit")
  user=$(sed -n 's/^User=//p' "$unit")
  envfile=$(sed -n 's/^EnvironmentFile=//p' "$unit")
  mapfile -t envs < <(grep -E '^[A-Z_][A-Z0-9_]*=' "$envfile")
  # shellcheck disable=SC2086 # the ExecStart line is split as systemd splits it
  $SUDO runuser -u "$user" -- env -i PATH=/usr/bin:/bin STATE_DIRECTORY=/var/lib/plantstore \
    "${envs[@]}" $exec 2>"$WORK/server.log" &
  PID=$!
  await_healthz "$URL" "$WORK/server.log"
}
# Waits for the server to answer GET $1/healthz, or fails with its log, $2.
await_healthz() {
  local url=$1 log=$2
  for _ in $(seq 1 100); do
    curl -sf "$url/healthz" >/dev/null && return 0
    sleep 0.1
  done
  cat "$log" >&2
  fail "the service did not answer /healthz at $url"
}
stop_service() {
  $SUDO pkill -TERM -u plantstore -x plantstore || true
  wait "$PID" || true
  PID=
}

echo "== dpkg -i $(deb "$V1" amd64)" >&2
$SUDO dpkg -i "$(deb "$V1" amd64)" | tee "$WORK/install.out"
grep -q "token is in /etc/plantstore/tokens" "$WORK/install.out" ||
  fail "the install did not say where the token is"
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd plantstore)
[ "$uid" -lt 1000 ] || fail "plantstore is not a system user (uid $uid)"
[ "$shell" = /usr/sbin/nologin ] || fail "plantstore's shell is $shell"
echo "   user plantstore: uid $uid, home $home, shell $shell" >&2
expect_mode /var/lib/plantstore "700 plantstore:plantstore"
expect_mode /etc/plantstore "750 root:plantstore"
expect_mode /etc/plantstore/tokens "640 root:plantstore"
expect_mode /etc/default/plantstore "644 root:root"
expect_mode /usr/bin/plantstore "755 root:root"
grep -qxE '[0-9a-f]{64}' /etc/plantstore/tokens || fail "the token file holds no 64-hex-digit token"
TOKEN=$(cat /etc/plantstore/tokens)
grep -q '^/etc/default/plantstore$' /var/lib/dpkg/info/plantstore.conffiles ||
  fail "/etc/default/plantstore is not a conffile"
grep -q '^LimitNOFILE=16384$' "$unit" || fail "the unit's LimitNOFILE is not 16384"
grep -q '^ExecStart=/usr/bin/plantstore$' "$unit" || fail "the unit's ExecStart takes flags"

echo "== systemd-analyze verify $unit" >&2
out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"

# The administrator's edit: this machine only, on a free port.
port=$(free_port)
URL=http://127.0.0.1:$port
$SUDO sed -i "s/^PLANTSTORE_ADDR=.*/PLANTSTORE_ADDR=127.0.0.1:$port/" /etc/default/plantstore

echo "== the service as installed: /healthz and a POST" >&2
start_service
status=$(curl -s -o "$WORK/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -d '{"id":7,"name":"Fern","tag":"green"}' "$URL/plants")
[ "$status" = 200 ] || fail "POST /plants: $status $(cat "$WORK/body")"
stop_service
[ -s /var/lib/plantstore/plants.journal ] || fail "no journal in /var/lib/plantstore"

# The unit's ProcSubset=pid hides /proc/net: bound to every address, the
# server must still list the URLs it answers at (as the docs say).
echo "== with /proc as ProcSubset=pid leaves it: the start-up line lists the URLs" >&2
port_all=$(free_port)
$SUDO unshare --mount --pid --fork sh -c 'mount -t proc -o subset=pid proc /proc &&
  exec runuser -u plantstore -- env -i PLANTSTORE_ADDR="0.0.0.0:$1" \
    PLANTSTORE_TOKEN_FILE=/etc/plantstore/tokens /usr/bin/plantstore' _ "$port_all" \
  2>"$WORK/subset.log" &
PID=$!
for _ in $(seq 1 100); do grep -q listening "$WORK/subset.log" && break; sleep 0.1; done
stop_service
grep -q "reachable at http://127.0.0.1:$port_all" "$WORK/subset.log" ||
  fail "without /proc/net the start-up line lists no URL: $(cat "$WORK/subset.log")"
expect_mode /var/lib/plantstore/plants.journal "600 plantstore:plantstore"

echo "== dpkg -i $(deb "$V2" amd64) over it" >&2
$SUDO dpkg -i "$(deb "$V2" amd64)" >/dev/null
[ "$(dpkg-query -W -f '${Version}' plantstore)" = "$V2" ] || fail "the upgrade did not install $V2"
[ "$(cat /etc/plantstore/tokens)" = "$TOKEN" ] || fail "the upgrade changed the token"
grep -qx "PLANTSTORE_ADDR=127.0.0.1:$port" /etc/default/plantstore ||
  fail "the upgrade did not keep the edited /etc/default/plantstore"
start_service
got=$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/plants/7")
[ "$got" = '{"id":7,"name":"Fern","tag":"green"}' ] || fail "after the upgrade GET /plants/7: $got"
echo "   after the upgrade: $got" >&2
stop_service

# 4. The page's own commands. A block of docs/raspberry-pi.md is the one
# after its line "<!-- check-deb: NAME -->"; run as root, as the page
# runs it (its sudo is then the identity).
doc_block() {
  awk -v mark="<!-- check-deb: $1 -->" '$0 == mark { found = 1; next }
    found && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' docs/raspberry-pi.md
}
run_doc() {
  local block
  block=$(doc_block "$1")
  [ -n "$block" ] || fail "docs/raspberry-pi.md has no block after <!-- check-deb: $1 -->"
  $SUDO bash -euo pipefail -c "sudo() { \"\$@\"; }
$block"
}
start_by_hand() {
  run_doc without-systemd >"$1" 2>&1 &
  PID=$!
}

echo "== docs/raspberry-pi.md, Without systemd: the command as written there" >&2
# Two settings written as the page says to where sh reads the file: a
# quoted value, and an & in single quotes.
hook="http://127.0.0.1:9/hook?board=1&room=2"
printf '%s\n' 'PLANTSTORE_LOG_FORMAT="json"' "PLANTSTORE_WEBHOOK='$hook'" |
  $SUDO tee -a /etc/default/plantstore >/dev/null
start_by_hand "$WORK/by-hand.log"
await_healthz "$URL" "$WORK/by-hand.log"
got=$(curl -s -H "Authorization: Bearer $TOKEN" "$URL/plants/7")
stop_service
[ "$got" = '{"id":7,"name":"Fern","tag":"green"}' ] ||
  fail "started by hand, GET /plants/7 with the token file's token: $got"
echo "   GET /plants/7 with the token of /etc/plantstore/tokens: $got" >&2
head -n 1 "$WORK/by-hand.log" | grep -q '^{' || fail "PLANTSTORE_LOG_FORMAT=\"json\" was not read as json"
grep -qF "$hook" "$WORK/by-hand.log" || fail "the webhook URL was not read whole: $(cat "$WORK/by-hand.log")"
$SUDO sed -i '/^PLANTSTORE_LOG_FORMAT=/d; /^PLANTSTORE_WEBHOOK=/d' /etc/default/plantstore

# Every https:// URL the start-up line in log $1 lists, and the names the
# install prints (uname -n) or the page uses, each resolved to this
# machine, with curl trusting only the certificate file $2; and a name the
# certificate does not hold refused (curl's exit 60).
check_https_urls() {
  local log=$1 ca=$2 port=$3 each url resolve out rc=0
  for _ in $(seq 1 100); do grep -q 'reachable at' "$log" && break; sleep 0.1; done
  local urls
  mapfile -t urls < <(grep 'reachable at' "$log" | grep -oE 'https://[^ ,]+')
  [ ${#urls[@]} -gt 0 ] || fail "the start-up line lists no URL: $(cat "$log")"
  for name in "$(uname -n)" "$(uname -n).local" localhost; do
    urls+=("https://$name:$port --resolve $name:$port:127.0.0.1")
  done
  # Addresses the server says its certificate leaves out (a local CA may
  # not vouch for a public address) are not checked.
  local left_out
  left_out=$(grep -o 'not in the certificate (its CA cannot vouch for them): .*' "$log" | cut -d: -f2- || true)
  for each in "${urls[@]}"; do
    read -r url resolve <<<"$each"
    local host=${url#https://}
    host=${host%:*}
    host=${host#[}
    host=${host%]}
    if [ -n "$left_out" ] && grep -qF " $host " <<<" ${left_out//,/ } "; then
      echo "   $url: left out of the certificate, as the log says" >&2
      continue
    fi
    # shellcheck disable=SC2086 # $resolve is none or two words
    out=$(curl -sS --cacert "$ca" $resolve "$url/healthz" 2>&1) ||
      fail "curl --cacert $ca $url: $out"
    echo "   $url/healthz with --cacert $(basename "$ca"): $out" >&2
  done
  curl -s --cacert "$ca" --resolve "elsewhere.invalid:$port:127.0.0.1" \
    "https://elsewhere.invalid:$port/healthz" >/dev/null || rc=$?
  [ "$rc" = 60 ] || fail "curl accepted the certificate for a name it does not hold (exit $rc)"
}

echo "== docs/raspberry-pi.md, Turn HTTPS on: the local CA as the page turns it on" >&2
port_tls=$(free_port)
$SUDO sed -i "s/^PLANTSTORE_ADDR=.*/PLANTSTORE_ADDR=0.0.0.0:$port_tls/" /etc/default/plantstore
run_doc https-auto
grep -q '^PLANTSTORE_TLS_AUTO=/var/lib/plantstore/tls$' /etc/default/plantstore ||
  fail "/etc/default/plantstore lacks the page's commented-out PLANTSTORE_TLS_AUTO line"
# Under /proc as the unit's ProcSubset=pid leaves it (the host's name
# comes from elsewhere then), with the settings file as the unit reads it.
$SUDO unshare --mount --pid --fork sh -c 'mount -t proc -o subset=pid proc /proc &&
  exec runuser -u plantstore -- env -i sh -c "set -ae; . /etc/default/plantstore; exec /usr/bin/plantstore"' \
  >"$WORK/auto.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do grep -q 'reachable at' "$WORK/auto.log" && break; sleep 0.1; done
# The host's name itself only when it has two labels or more (a CA that
# permitted a single-label name would permit every name under it).
case $(uname -n) in
*.*) named="$(uname -n), $(uname -n).local," ;;
*) named="$(uname -n).local," ;;
esac
grep -q "tls-auto: new certificate .* for .*$named" "$WORK/auto.log" ||
  fail "the certificate does not name the host: $(cat "$WORK/auto.log")"
logged=$(grep -oE 'SHA-256 fingerprint [0-9A-F:]+' "$WORK/auto.log" | cut -d' ' -f3)
# What a device does: fetch the CA without trusting anything yet, then
# compare its fingerprint with the log's.
curl -sSk "https://127.0.0.1:$port_tls/ca.pem" -o "$WORK/ca.pem" || fail "GET /ca.pem: $(cat "$WORK/auto.log")"
fetched=$(openssl x509 -in "$WORK/ca.pem" -noout -fingerprint -sha256 | cut -d= -f2)
[ -n "$logged" ] || fail "the log gives no SHA-256 fingerprint: $(cat "$WORK/auto.log")"
[ "$logged" = "$fetched" ] ||
  fail "the fingerprint of /ca.pem ($fetched) is not the log's ($logged)"
echo "   /ca.pem's SHA-256 fingerprint is the log's: $fetched" >&2
expect_mode /var/lib/plantstore/tls "700 plantstore:plantstore"
expect_mode /var/lib/plantstore/tls/ca.key "600 plantstore:plantstore"
check_https_urls "$WORK/auto.log" "$WORK/ca.pem" "$port_tls"
stop_service
$SUDO sed -i 's|^PLANTSTORE_TLS_AUTO=|#PLANTSTORE_TLS_AUTO=|' /etc/default/plantstore

echo "== docs/raspberry-pi.md, Turn HTTPS on: the recipe for files of your own as written there" >&2
run_doc https-certificate
expect_mode /etc/plantstore/key.pem "640 root:plantstore"
# The page's two lines, uncommented; every address, so that the start-up
# line lists the LAN's too.
port_tls=$(free_port)
$SUDO sed -i -e 's|^#\(PLANTSTORE_TLS_CERT=/etc/plantstore/cert.pem\)$|\1|' \
  -e 's|^#\(PLANTSTORE_TLS_KEY=/etc/plantstore/key.pem\)$|\1|' \
  -e "s/^PLANTSTORE_ADDR=.*/PLANTSTORE_ADDR=0.0.0.0:$port_tls/" /etc/default/plantstore
[ "$(grep -c '^PLANTSTORE_TLS_\(CERT\|KEY\)=' /etc/default/plantstore)" = 2 ] ||
  fail "/etc/default/plantstore lacks the page's commented-out TLS lines"
start_by_hand "$WORK/https.log"
check_https_urls "$WORK/https.log" /etc/plantstore/cert.pem "$port_tls"
stop_service

echo "== dpkg -r plantstore" >&2
$SUDO dpkg -r plantstore >/dev/null
[ ! -e /usr/bin/plantstore ] || fail "dpkg -r left /usr/bin/plantstore"
[ -s /var/lib/plantstore/plants.journal ] || fail "dpkg -r removed the journal"
[ "$(cat /etc/plantstore/tokens)" = "$TOKEN" ] || fail "dpkg -r removed the token"
echo "   the journal and the token are kept" >&2

echo "== dpkg -P plantstore" >&2
kept=$($SUDO sha256sum /etc/plantstore/cert.pem /etc/plantstore/key.pem)
$SUDO dpkg -P plantstore >"$WORK/purge.out"
cat "$WORK/purge.out"
for path in /var/lib/plantstore /etc/plantstore/tokens /etc/default/plantstore; do
  [ ! -e "$path" ] || fail "dpkg -P left $path"
done
[ "$($SUDO sha256sum /etc/plantstore/cert.pem /etc/plantstore/key.pem 2>&1)" = "$kept" ] ||
  fail "dpkg -P removed or changed the certificate and key it did not make"
grep -q "kept /etc/plantstore" "$WORK/purge.out" || fail "dpkg -P did not say that it kept /etc/plantstore"
echo "   the journal, the token and /etc/default/plantstore are gone; the certificate and key are kept" >&2

echo "== dpkg -i and dpkg -P, nothing of the administrator's in /etc/plantstore" >&2
$SUDO rm /etc/plantstore/cert.pem /etc/plantstore/key.pem
$SUDO dpkg -i "$(deb "$V2" amd64)" >/dev/null
$SUDO dpkg -P plantstore >/dev/null
[ ! -e /etc/plantstore ] || fail "dpkg -P left /etc/plantstore: $(ls -A /etc/plantstore)"
echo "   /etc/plantstore is gone" >&2
echo "the Debian packages: lintian, smoke tests, the amd64 install, upgrade, remove and purge, and the page's commands passed"
