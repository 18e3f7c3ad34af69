#!/usr/bin/env bash
# The operators' files in contrib/ against a live plantstore: Debian's
# Prometheus scrapes two instances with contrib/prometheus-plantstore.yml
# (its token read from a file, the config first through `promtool check
# config`), one with a journal and one on PostgreSQL, while they are sent
# requests of every kind and a change feed stream is open; then every query
# of every panel of contrib/grafana-plantstore.json must return data, and
# the dashboard's JSON must have the shape Grafana imports. Grafana itself
# is not packaged here.
#
#   scripts/with-postgres.sh scripts/check/check-dashboard.sh [--picture FILE]
#
# --picture FILE: also draws the main panel's query on Prometheus's own
# graph page in headless Chromium (scripts/browser/browser.sh's Selenium) and saves
# it as FILE (the picture in docs/metrics.md). Installs prometheus with apt
# when missing. Every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

picture=
case "${1:-}" in
    --picture) picture=$(realpath -m "$2") ;;
    '') ;;
    *) echo "usage: scripts/check/check-dashboard.sh [--picture FILE]" >&2; exit 2 ;;
esac
[ -n "${PLANTSTORE_TEST_DATABASE:-}" ] || {
    echo "check-dashboard: run it through scripts/with-postgres.sh (the database panels need an instance on PostgreSQL)" >&2
    exit 2
}
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    scripts/apt-install.sh prometheus
fi

# The instance on the journal: SERVE_BIN if given (a default build made
# already), else target/release/plantstore.
journal_bin=${SERVE_BIN:-target/release/plantstore}
[ -n "${SERVE_BIN:-}" ] || cargo build --release --quiet
# The instance on PostgreSQL: SERVE_POSTGRES_BIN if given (a postgres
# build made already), else the release build in target/postgres.
postgres_bin=${SERVE_POSTGRES_BIN:-target/postgres/release/plantstore}
[ -n "${SERVE_POSTGRES_BIN:-}" ] ||
    cargo build --release --quiet --features postgres --target-dir target/postgres
work=$(mktemp -d)
database=plantstore_dashboard
pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    psql -q -X -d "$PLANTSTORE_TEST_DATABASE" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" || true
    rm -rf "$work"
}
trap stop EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
token=dashboard-token
printf '%s\n' "$token" >"$work/token"

psql -q -X -d "$PLANTSTORE_TEST_DATABASE" -c "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database"
journal_port=$(free_port)
PLANTSTORE_TOKEN=$token "$journal_bin" --addr "127.0.0.1:$journal_port" \
    --data "$work/plants.journal" --log-level warn 2>"$work/journal.log" &
pids+=($!)
database_port=$(free_port)
PLANTSTORE_TOKEN=$token "$postgres_bin" --addr "127.0.0.1:$database_port" \
    --database "${PLANTSTORE_TEST_DATABASE%/*}/$database" --log-level warn 2>"$work/database.log" &
pids+=($!)
for port in "$journal_port" "$database_port"; do
    for _ in $(seq 1 200); do
        curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
        sleep 0.05
    done
done

# The shipped config, pointed at the token file and the two instances,
# scraping every second.
prom_port=$(free_port)
sed -e "s|/etc/prometheus/plantstore-token|$work/token|" \
    -e "s|- 127.0.0.1:8080|- 127.0.0.1:$journal_port\n          - 127.0.0.1:$database_port|" \
    -e 's|scrape_interval: 15s|scrape_interval: 1s|' \
    contrib/prometheus-plantstore.yml >"$work/prometheus.yml"
promtool check config "$work/prometheus.yml" >/dev/null
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn 2>"$work/prometheus.log" &
pids+=($!)

# Traffic of every kind, for a few seconds, and a feed stream open.
auth=(-H "Authorization: Bearer $token")
json=(-H "Content-Type: application/json")
curl -sN --max-time 20 "${auth[@]}" "http://127.0.0.1:$journal_port/plants/changes" >/dev/null &
pids+=($!)
for round in $(seq 1 12); do
    for port in "$journal_port" "$database_port"; do
        base=http://127.0.0.1:$port
        curl -s -o /dev/null "${auth[@]}" "${json[@]}" -d "{\"id\":$round,\"name\":\"p$round\"}" "$base/plants"
        curl -s -o /dev/null -X PUT "${auth[@]}" "${json[@]}" -d '{"name":"q"}' "$base/plants/$round"
        curl -s -o /dev/null "${auth[@]}" "$base/plants?limit=5"
        curl -s -o /dev/null "${auth[@]}" "$base/plants/999999"
        curl -s -o /dev/null "$base/plants"
        [ $((round % 3)) -ne 0 ] || curl -s -o /dev/null -X DELETE "${auth[@]}" "$base/plants/$round"
    done
    sleep 0.5
done

# Every panel's every query returns data.
python3 - "http://127.0.0.1:$prom_port" contrib/grafana-plantstore.json <<'EOF'
import json, sys, time, urllib.parse, urllib.request

prometheus, path = sys.argv[1], sys.argv[2]
dashboard = json.load(open(path))
failures = []

def check(condition, what):
    if not condition:
        failures.append(what)

# The shape Grafana imports: panels with ids, grid positions and targets.
check(isinstance(dashboard.get("panels"), list) and dashboard["panels"], "no panels")
check(dashboard.get("schemaVersion", 0) >= 36, "schemaVersion")
names = [v.get("name") for v in dashboard.get("templating", {}).get("list", [])]
check("datasource" in names and "job" in names, f"variables {names}")
ids = [p.get("id") for p in dashboard["panels"]]
check(len(ids) == len(set(ids)), f"panel ids repeat: {ids}")
queries = []
for panel in dashboard["panels"]:
    title = panel.get("title", "?")
    grid = panel.get("gridPos", {})
    check(all(isinstance(grid.get(k), int) for k in "hwxy"), f"{title}: gridPos")
    check(panel.get("type") == "timeseries", f"{title}: type")
    check(panel.get("targets"), f"{title}: no targets")
    for target in panel.get("targets", []):
        check(target.get("refId") and target.get("expr"), f"{title}: target")
        queries.append((title, target["expr"]))

def query(expr):
    expr = expr.replace("$job", "plantstore").replace("$__rate_interval", "30s")
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as reply:
        answer = json.load(reply)
    return answer["status"], answer["data"]["result"]

# Prometheus has scraped a few times by now; allow it a little longer.
deadline = time.monotonic() + 30
for title, expr in queries:
    while True:
        status, result = query(expr)
        if (status == "success" and result) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(status == "success" and result, f"{title}: no data for {expr}")
for failure in failures:
    print(f"check-dashboard: FAIL: {failure}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"check-dashboard: ok: {len(queries)} queries of {len(dashboard['panels'])} panels return data")
EOF

if [ -n "$picture" ]; then
    # Half a minute more of traffic, so the picture has a graph to show.
    for round in $(seq 100 160); do
        base=http://127.0.0.1:$journal_port
        curl -s -o /dev/null "${auth[@]}" "${json[@]}" -d "{\"id\":$round,\"name\":\"p\"}" "$base/plants"
        for _ in $(seq 1 $((round % 7 + 1))); do curl -s -o /dev/null "${auth[@]}" "$base/plants?limit=5"; done
        curl -s -o /dev/null "${auth[@]}" "$base/plants/$round"
        sleep 0.5
    done
    venv=.venv-browser
    [ -x "$venv/bin/python" ] || { echo "check-dashboard: --picture needs scripts/browser/browser.sh run once (Selenium)" >&2; exit 1; }
    "$venv/bin/python" - "http://127.0.0.1:$prom_port" "$picture" <<'EOF'
import json, sys, time, urllib.parse
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

prometheus, out = sys.argv[1], sys.argv[2]
main = json.load(open("contrib/grafana-plantstore.json"))["panels"][0]["targets"][0]["expr"]
expr = main.replace("$job", "plantstore").replace("$__rate_interval", "30s")
options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1200"]:
    options.add_argument(arg)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    query = urllib.parse.urlencode({"g0.expr": expr, "g0.tab": "0", "g0.range_input": "30s"})
    driver.get(f"{prometheus}/graph?{query}")
    time.sleep(3)
    driver.save_screenshot(out)
finally:
    driver.quit()
print(f"check-dashboard: picture of the main panel's query: {out}")
EOF
fi
