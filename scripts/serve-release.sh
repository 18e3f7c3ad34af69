# Sourced by the scripts that test the release binary: builds it, starts it
# on a free loopback port (it binds port 0 and logs the real one) with
# PLANTSTORE_TOKEN=$token and any further flags in the array $serve_args,
# and sets $addr (host:port, whether it serves http:// or, given
# --tls-cert and --tls-key, https://); the server is stopped on exit. With
# $serve_features (cargo features, e.g. postgres) the build has a target
# directory of its own, target/$serve_features, so
# target/release/plantstore stays the default build.
#
# SERVE_BIN names a default build to serve instead of building
# target/release/plantstore, SERVE_POSTGRES_BIN a postgres build instead
# of building one (CI hands them its published build and the build its
# PostgreSQL tests made).
serve_bin=${SERVE_BIN:-target/release/plantstore}
if [ "${serve_features:-}" = postgres ] && [ -n "${SERVE_POSTGRES_BIN:-}" ]; then
    serve_bin=$SERVE_POSTGRES_BIN
elif [ -n "${serve_features:-}" ]; then
    cargo build --release --quiet --features "$serve_features" --target-dir "target/${serve_features//,/-}"
    serve_bin=target/${serve_features//,/-}/release/plantstore
elif [ -z "${SERVE_BIN:-}" ]; then
    cargo build --release --quiet
fi

serve_log=$(mktemp)
PLANTSTORE_TOKEN=$token "$serve_bin" --addr 127.0.0.1:0 \
    ${serve_args[@]+"${serve_args[@]}"} 2>"$serve_log" &
serve_pid=$!
# The caller's own cleanup, if any, in $serve_on_exit: this trap replaces
# the caller's, so it runs it too, whichever way the script ends.
trap 'kill $serve_pid 2>/dev/null || true; wait $serve_pid 2>/dev/null || true; rm -f "$serve_log"; eval "${serve_on_exit:-}"' EXIT
addr=
for _ in $(seq 100); do
    addr=$(grep -o 'listening on https\?://[^,]*' "$serve_log" | sed 's|listening on https\?://||' || true)
    [ -n "$addr" ] && break
    sleep 0.05
done
[ -n "$addr" ] || { echo "server did not start"; cat "$serve_log"; exit 1; }
