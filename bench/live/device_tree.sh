#!/usr/bin/env bash
# The device tool carries the working tree (tracked files and untracked ones git does not
# ignore) with the carried paths, 64 MiB in all, and refuses a call above it. The bundle
# (.carry/live-sglang, 50 MiB) and the stored results (bench/results: the calls' archives and
# the rendered SVGs, 10 MiB by call 53) no longer fit together. The device needs none of those
# results, and git keeps every one of them, so a session can leave them out of the working tree
# while it runs device calls and check them out again after:
#   bash bench/live/device_tree.sh size    # the bytes a call would carry (.carry/* included)
#   bash bench/live/device_tree.sh slim    # remove bench/results' *.tgz and *.svg from the tree
#   bash bench/live/device_tree.sh back    # git checkout them again (before committing)
# slim refuses while any of them differs from what git holds (nothing is lost); new calls'
# folders are untracked and stay.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
heavy() { git ls-files -- 'bench/results/*.tgz' 'bench/results/*.svg'; }
case ${1:-} in
  size)
    tracked=$( { git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')
    carried=$(du -sb .carry 2>/dev/null | cut -f1 || echo 0)
    echo "working tree $tracked bytes, .carry ${carried:-0} bytes: $(( tracked + ${carried:-0} )) of $(( 64 * 1024 * 1024 ))"
    ;;
  slim)
    if ! git diff --quiet -- $(heavy); then
      echo "device_tree.sh: bench/results' archives differ from git; commit them first" >&2
      exit 1
    fi
    heavy | xargs -r rm -f --
    echo "removed $(heavy | wc -l) files; bash bench/live/device_tree.sh back restores them"
    ;;
  back)
    gone=$(git ls-files --deleted -- 'bench/results/*.tgz' 'bench/results/*.svg')
    [ -z "$gone" ] || git checkout -- $gone
    echo "restored $(printf '%s' "$gone" | grep -c . || true) files"
    ;;
  *)
    echo "usage: bash bench/live/device_tree.sh size|slim|back" >&2
    exit 2
    ;;
esac
