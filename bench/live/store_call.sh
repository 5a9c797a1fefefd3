#!/usr/bin/env bash
# Store one device call's results in the repository: copy SRC (the call's $OUT as fetched, e.g.
# the files_at folder) into the new folder DEST (e.g. bench/results/live/sweep/call31), then
# gzip its large text files in place: *.jsonl, *.log and *.json of 8 KiB or more, X -> X.gz
# (gzip -9 -n: no name or time in the header, so storing again writes the same bytes). Every
# reader of bench/results/live takes the plain name and reads either (stored_results.py).
# Archives, reports (*.md, *.csv) and small files stay as they are.
#   bash bench/live/store_call.sh SRC DEST
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bash bench/live/store_call.sh SRC DEST" >&2; exit 2; }
src=$1
dest=${2%/}
[ -d "$src" ] || { echo "store_call.sh: no folder $src (the call's \$OUT)" >&2; exit 2; }
[ ! -e "$dest" ] || { echo "store_call.sh: $dest exists; store a call into a new folder" >&2; exit 2; }
mkdir -p "$dest"
cp -R "$src"/. "$dest"/
chmod -R u+w "$dest" # the files fetched from a device are read-only
mapfile -d '' big < <(find "$dest" -type f \( -name '*.jsonl' -o -name '*.log' -o -name '*.json' \) \
  -size +8191c -print0 | sort -z)
[ ${#big[@]} -eq 0 ] || gzip -9 -n -- "${big[@]}"
files=$(find "$dest" -type f | wc -l)
bytes=$(find "$dest" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
echo "$dest: $files files, $bytes bytes; gzipped: ${big[*]#"$dest"/}"
