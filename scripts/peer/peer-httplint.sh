#!/usr/bin/env bash
# HTTP as others read it: REDbot (and httplint, the linter it is built on)
# checks the GET routes of the release build on loopback: the plants list
# (after two plants are created), a plant, the built-in page and its files,
# /openapi.json and /healthz, each with REDbot's own revalidation, gzip and
# Range probes (scripts/peer/peer-httplint.py drives it). Fails on any
# error-level note that is not on that file's allow-list, and on a missing
# Date (a warning to httplint, by its note ids); other warnings are
# printed.
#
# Usage: scripts/peer/peer-httplint.sh [BASE_URL [TOKEN]]
#   With no argument it builds and starts the release binary itself (port
#   0, stopped on exit). With BASE_URL it checks that server instead (the
#   plants are created there too, with TOKEN, default peer-token): the way
#   to show the check fails, against tests/peer/broken-http.py.
# Installs REDbot into .venv-redbot.
set -euo pipefail
cd "$(dirname "$0")/../.."
started=$SECONDS

venv=.venv-redbot
redbot_version=2.7.1
if [ ! -x "$venv/bin/python" ] ||
    ! "$venv/bin/python" -c "import sys, redbot; sys.exit(redbot.__version__ != '$redbot_version')" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "redbot==$redbot_version"
fi
[ -z "${INSTALL_ONLY:-}" ] || exit 0  # scripts/ci/ci-prepare.sh: install only

if [ $# -gt 0 ]; then
    base=${1%/}
    token=${2:-peer-token}
else
    token=peer-token
    # shellcheck source=scripts/serve-release.sh
    . scripts/serve-release.sh
    base="http://$addr"
fi

for plant in '{"id":1,"name":"Monstera","tag":"tropical"}' '{"id":2,"name":"Fern"}'; do
    curl -fsS -o /dev/null "$base/plants" -H "Authorization: Bearer $token" \
        -H 'Content-Type: application/json' -d "$plant"
done

# '+': sent with the bearer token (the API's routes).
"$venv/bin/python" scripts/peer/peer-httplint.py "$base" "$token" \
    +/plants +/plants/1 / /ui.css /ui.js /ui.svg /openapi.json /healthz
echo "peer-httplint: passed in $((SECONDS - started)) s"
