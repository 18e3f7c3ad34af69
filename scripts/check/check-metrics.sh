#!/usr/bin/env bash
# /metrics passes `promtool check metrics` (Debian's prometheus package)
# with nothing to report: the release binary with a journal is sent a few
# requests of each kind, then scraped. Installs prometheus with apt when
# promtool is missing (its service is not left running); fails if it
# cannot.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v promtool >/dev/null; then
    scripts/apt-install.sh prometheus
    command -v promtool >/dev/null || { echo "promtool is not installed"; exit 1; }
fi

data=$(mktemp -d)
token="metrics-token"
serve_args=(--data "$data/plants.journal")
serve_on_exit='rm -rf "$data"'
# shellcheck source=scripts/serve-release.sh
. scripts/serve-release.sh

base=http://$addr
auth=(-H "Authorization: Bearer $token")
json=(-H "Content-Type: application/json")
for id in 1 2 3; do
    curl -sf -o /dev/null "${auth[@]}" "${json[@]}" -d "{\"id\":$id,\"name\":\"p$id\"}" "$base/plants"
done
curl -sf -o /dev/null -X PUT "${auth[@]}" "${json[@]}" -d '{"name":"q"}' "$base/plants/1"
curl -sf -o /dev/null -X DELETE "${auth[@]}" "$base/plants/2"
curl -sf -o /dev/null "${auth[@]}" "$base/plants"
curl -s -o /dev/null "${auth[@]}" "$base/plants/9"
curl -s -o /dev/null "$base/plants"
curl -sf -o /dev/null "$base/healthz"
curl -sf -o /dev/null "$base/openapi.json"
curl -s -o /dev/null "$base/nowhere"

metrics=$(curl -sf "${auth[@]}" "$base/metrics")
for name in plantstore_request_duration_seconds_bucket plantstore_build_info \
    process_start_time_seconds process_resident_memory_bytes process_open_fds \
    process_cpu_seconds_total plantstore_journal_bytes plantstore_journal_compactions_total \
    plantstore_auth_refusals_total plantstore_auth_throttle_entries; do
    grep -q "^$name" <<<"$metrics" || { echo "/metrics lacks $name"; exit 1; }
done
report=$(promtool check metrics <<<"$metrics" 2>&1) || {
    echo "promtool check metrics failed:"; echo "$report"; exit 1
}
[ -z "$report" ] || { echo "promtool check metrics reports:"; echo "$report"; exit 1; }
echo "promtool check metrics: clean ($(grep -c -v '^#' <<<"$metrics") samples)"
