#!/usr/bin/env bash
# Installs Debian packages for a script or CI, without starting their
# services (a policy-rc.d that answers 101 while apt runs): a package such
# as postgresql, prometheus or nginx would otherwise start a server of its
# own. Uses sudo when not root; fails loudly. Recommended packages are left
# out unless --with-recommends comes first.
#
#   scripts/apt-install.sh [--with-recommends] PACKAGE...
set -euo pipefail
recommends=--no-install-recommends
[ "${1:-}" != --with-recommends ] || { recommends=; shift; }
[ $# -gt 0 ] || { echo "usage: scripts/apt-install.sh [--with-recommends] PACKAGE..." >&2; exit 2; }

sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
policy=/usr/sbin/policy-rc.d
added_policy=
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    added_policy=1
fi
installed=0
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $recommends \
    "$@" >/dev/null || installed=$?
[ -z "$added_policy" ] || $sudo rm -f "$policy"
[ "$installed" -eq 0 ] || { echo "installing $* failed" >&2; exit 1; }
