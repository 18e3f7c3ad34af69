#!/usr/bin/env bash
# The entry CI calls: the architecture check is scripts/check/check-layers.py
# (its --help says what it enforces); this wrapper keeps the old name.
set -euo pipefail
exec python3 "$(dirname "$0")/check-layers.py" "$@"
