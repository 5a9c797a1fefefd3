#!/usr/bin/env bash
# Repack the recipe bundle's site (.carry/live-sglang/site.tar.xz, written by
# ../shared/live-sglang/bundle.sh at xz's default level) at xz -9e: the same tar, byte for byte
# (checked), about 2 MB smaller, which a device call's 64 MiB needs beside the repo and a hook
# carry. Run it after bundle.sh, from the repo root (a few minutes, one core):
#   bash bench/live/repack_bundle.sh [BUNDLE_DIR]
set -euo pipefail
dir=${1:-.carry/live-sglang}
src=$dir/site.tar.xz
[ -f "$src" ] || { echo "no $src: run bash ../shared/live-sglang/bundle.sh first" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
xz -dc "$src" > "$tmp/site.tar"
xz -9e -T1 -c "$tmp/site.tar" > "$tmp/site.tar.xz"
want=$(sha256sum < "$tmp/site.tar" | cut -d' ' -f1)
got=$(xz -dc "$tmp/site.tar.xz" | sha256sum | cut -d' ' -f1)
[ "$want" = "$got" ] || { echo "repacked tar differs ($got, want $want): $src left as it was" >&2; exit 1; }
before=$(stat -c %s "$src"); after=$(stat -c %s "$tmp/site.tar.xz")
if [ "$after" -lt "$before" ]; then
  mv "$tmp/site.tar.xz" "$src"
  echo "$src: $before -> $after bytes, the same tar ($want)"
else
  echo "$src: already $before bytes (repacked: $after); left as it was"
fi
