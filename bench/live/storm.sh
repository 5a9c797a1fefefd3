#!/usr/bin/env bash
# A toggle storm longer than one device call (issue 20: ten minutes of it survived), in TWO calls
# made back to back on the same warm machine (the server and the storm client run in their own
# sessions, which outlive the first call; the machine stays warm 30 s between calls).
#
# Before (on your machine): bash ../shared/live-sglang/bundle.sh and
#   PYTHONPATH=src python bench/live/prepare_hook_check.py --plain --trace --trace-only plain_k384 \
#     --share-payload --out .carry/plain-check
# Call 1, carry [".carry/live-sglang", ".carry/plain-check"]:  bash bench/live/storm.sh start
#   the copy model, one EAGLE-3 server with the hook switching every result (plain_k1), its
#   serial check, then copy_check.py's storm (load rounds with aborts, STORM_S seconds, a
#   progress line a round) started in its own session; the call watches until its deadline and
#   returns the progress so far, leaving server and storm running.
# Call 2, the same carry, at once:  bash bench/live/storm.sh finish
#   waits for the storm to end, reads the KV in use once idle, stops the server, writes the
#   report (copy_check_report.py).
# Comes back in $OUT: run.log, progress.jsonl, copy.jsonl, copy_check.md/.json, servers.tgz
# Knobs (env): STORM_S (660), DEADLINE_S (585), NAME (plain_k1), HOOKS, PORT, STATE, LOGS, MODEL.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/storm-out}
STATE=${STATE:-/tmp/storm}
LOGS=${LOGS:-/tmp/copy-logs}
mkdir -p "$OUT" "$STATE" "$LOGS"
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-585}
STORM_S=${STORM_S:-660}
RECIPE=${RECIPE:-.carry/live-sglang}
PORT=${PORT:-30100}
MODEL=${MODEL:-/tmp/copy}
HOOKS=${HOOKS:-.carry/plain-check}
NAME=${NAME:-plain_k1}
HERE=bench/live
. "$HERE/device_env.sh"
snapshot() {  # what the storm wrote so far, into $OUT
  cp "$STATE"/progress.jsonl "$STATE"/copy.jsonl "$OUT"/ 2>/dev/null
  cat "$STATE/run.log" > "$OUT/run.log" 2>/dev/null
}
log() { echo "[$(el)s] $*" | tee -a "$STATE/run.log"; }

case ${1:-} in
start)
  hook_dirs_ready "$HOOKS" "$RECIPE/site.tar.xz" "$HOOKS/$NAME/sgtrace_hook.json" \
    || { snapshot; exit 2; }
  device_env
  install_bundle "$RECIPE/jitcache.tgz" "$HOOKS/jitcache.tgz"
  PYTHONPATH=$SITE python3 "$HERE/make_copy_model.py" "$MODEL" --check >> "$STATE/run.log" 2>&1 \
    || { log "model build failed"; snapshot; exit 3; }
  start_server "$NAME" "$LOGS/server_$NAME.log" "$(cd "$HOOKS/$NAME" && pwd):$SITE" -- \
    --model-path "$MODEL/target" --attention-backend triton --host 127.0.0.1 \
    --mem-fraction-static 0.6 --max-running-requests 64 --cuda-graph-max-bs 64 \
    --disable-prefill-cuda-graph --sampling-backend pytorch --grammar-backend none \
    --log-level info --sleep-on-idle --port "$PORT" --max-total-tokens 65536 \
    --speculative-algorithm EAGLE3 --speculative-draft-model-path "$MODEL/draft" \
    --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
  wait_ready 300 "$LOGS" "$NAME"
  [ "${READY[$NAME]:-dead}" = dead ] && { log "server did not start"; snapshot; exit 4; }
  date +%s > "$STATE/storm_t0"
  log "== $NAME: serial, then a storm of ${STORM_S}s in its own session"
  setsid bash -c 'echo $$ > "$0"; exec "$@"' "$STATE/client.pid" python3 "$HERE/copy_check.py" \
    --port "$PORT" --label "$NAME" --vocab 4096 --offset 2 --phases serial,storm --conc 48 \
    --requests 80 --storm-s "$STORM_S" --progress "$STATE/progress.jsonl" \
    --out "$STATE/copy.jsonl" > "$STATE/client.log" 2>&1 < /dev/null &
  while [ "$(left)" -gt 20 ]; do sleep 10; snapshot; done
  log "call 1 ends; storm at $(( $(date +%s) - $(cat "$STATE/storm_t0") ))s, server and storm left running"
  snapshot
  ;;
finish)
  [ -f "$STATE/storm_t0" ] || { log "no storm on this machine (a fresh one?): nothing to finish"; snapshot; exit 2; }
  pid=$(cat "$STATE/client.pid" 2>/dev/null)
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(left)" -gt 60 ]; do sleep 2; done
  log "storm client ended after $(( $(date +%s) - $(cat "$STATE/storm_t0") ))s since its start"
  cat "$STATE/client.log" >> "$STATE/run.log"
  PID[$NAME]=$(cat "/tmp/server-$NAME.pid" 2>/dev/null)
  stop_server "$NAME"
  python3 "$HERE/copy_check_report.py" --results "$STATE/copy.jsonl" --logs "$LOGS" \
    --traces "$HOOKS" --out "$OUT" 2>&1 | tee -a "$STATE/run.log"
  tar -C "$LOGS" -czf "$OUT/servers.tgz" .
  snapshot
  ;;
*) echo "usage: storm.sh start|finish" >&2; exit 2 ;;
esac
