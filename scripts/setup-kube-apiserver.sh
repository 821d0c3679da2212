#!/usr/bin/env bash
# A real Kubernetes API server for the CRD-backed tests: upstream apiextensions-apiserver built from
# Debian sid's Go sources with Debian's Go, and Debian's etcd. It serves CRDs (OCM's, and CRDs standing in
# for the built-in groups the plugins use); TokenReview and SubjectAccessReview come from a test double.
# Built once and cached: prints the folder holding `apiextensions-apiserver` and `etcd`.
set -euo pipefail

cache="${XDG_CACHE_HOME:-$HOME/.cache}/conductor/kube"
log() { echo "setup-kube-apiserver: $*" >&2; }

if [[ -x "$cache/bin/apiextensions-apiserver" && -x "$cache/bin/etcd" ]]; then
    echo "$cache/bin"
    exit 0
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
    log "installing mmdebstrap"
    if [[ $(id -u) -eq 0 ]]; then apt-get update -qq >&2 && apt-get install -y -qq mmdebstrap >&2
    else sudo apt-get update -qq >&2 && sudo apt-get install -y -qq mmdebstrap >&2; fi
fi
# The Debian mirror this machine's apt already uses (deb822 .sources files, or one-line lists).
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | tr ' ' '\n' | grep -v -e security -e '^$' | head -n1 || true)
if [[ -z "$mirror" ]]; then
    mirror=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | grep -v security | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit }}' || true)
fi
if [[ -z "$mirror" ]]; then
    log "no Debian mirror in this machine's apt sources (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list): configure apt first"
    exit 1
fi
root="$cache/root"
rm -rf "$root" && mkdir -p "$root" "$cache/bin"
log "extracting Go, the apiextensions-apiserver sources and etcd from sid ($mirror)"
mmdebstrap --variant=extract --aptopt='Acquire::Check-Valid-Until "false"' \
    --include=golang-1.27-go,golang-k8s-apiextensions-apiserver-dev,etcd-server \
    sid "$root" "deb $mirror sid main" >&2
for d in src test; do ln -sfn "../../share/go-1.27/$d" "$root/usr/lib/go-1.27/$d"; done
log "building apiextensions-apiserver (about 10 minutes on 2 cores)"
GOROOT="$root/usr/lib/go-1.27" GOPATH="$root/usr/share/gocode" GO111MODULE=off GOTOOLCHAIN=local \
    GOPROXY=off CGO_ENABLED=0 GOCACHE="$cache/gocache" \
    "$root/usr/lib/go-1.27/bin/go" build -trimpath -ldflags='-s -w' \
    -o "$cache/bin/apiextensions-apiserver" k8s.io/apiextensions-apiserver >&2
cp "$root/usr/bin/etcd" "$cache/bin/etcd"
rm -rf "$root" "$cache/gocache"
log "ready in $cache/bin"
echo "$cache/bin"
