#!/usr/bin/env bash
# Live check of the sgtrace speculation hook on SGLang 0.5.16 + EAGLE-3, in ONE device call.
#
# Before (on your machine):  python bench/live/prepare_hook_check.py
#   (writes .carry/hook-check/{hook_bs,hook_default}: runtime hook dirs for sglang 0.5.16)
# Device call, from the repo root, carry [".carry/live-sglang", ".carry/hook-check"]:
#   bash bench/live/hook_check.sh            (timeout_s 600; DEADLINE_S defaults to 530)
#
# Reuses the recipe in .carry/live-sglang (bundle, make_tiny_models.py, load.py,
# adaptive_max3.json; see ../shared/live-sglang/README.md). Starts five servers at once on
# the one GPU (own process group each, --sleep-on-idle so idle ones leave the CPUs alone):
#   base (no speculation), eagle3, adaptive (upstream --speculative-adaptive, capped config),
#   hook_bs (EAGLE-3 + hook, batch-size policy), hook_default (EAGLE-3 + hook, default policy).
# Then, one server at a time, the others idle: greedy outputs of a fixed prompt set
# (greedy_check.py), throughput at concurrency 1, 8, 64 (load.py; hook_bs runs 1,8,64,1 to
# show the way back on), and the server is stopped. hook_check_report.py compares the greedy
# outputs with base, reads the hook's toggles from the logs and writes the verdict.
# Comes back in $OUT (<= 8 files): run.log results.jsonl greedy.jsonl hook_check.json
# hook_check.md servers.tgz jitcache.tgz
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/hook-check-out}
mkdir -p "$OUT" /tmp/hook-check-logs
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-530}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-330}
RECIPE=.carry/live-sglang
HOOKS=${HOOKS:-.carry/hook-check}
HERE=bench/live
TINY=/tmp/tiny
LOGS=/tmp/hook-check-logs
. "$HERE/device_env.sh"

for need in "$RECIPE/site.tar.xz" "$RECIPE/load.py"; do
  [ -e "$need" ] || { log "MISSING $need: run bench/live/prepare_hook_check.py and carry .carry/live-sglang and .carry/hook-check"; exit 2; }
done

device_env
install_bundle "$RECIPE/jitcache.tgz" "$HOOKS/jitcache.tgz"
log "== tiny models"
PYTHONPATH=$SITE python3 "$RECIPE/make_tiny_models.py" "$TINY" --corpus-dir "$SITE/sglang/srt/managers" >> "$OUT/run.log" 2>&1
echo '{"bos_token_id": 1, "eos_token_id": 2, "do_sample": false}' > "$TINY/target/generation_config.json"

COMMON=(--model-path "$TINY/target" --attention-backend triton --host 127.0.0.1
        --mem-fraction-static 0.5 --max-running-requests 64 --cuda-graph-max-bs 64
        --disable-prefill-cuda-graph --sampling-backend pytorch --grammar-backend none
        --max-total-tokens 262144 --log-level info --sleep-on-idle ${EXTRA_ARGS:-})
SPEC=(--speculative-algorithm EAGLE3 --speculative-draft-model-path "$TINY/draft"
      --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4)
NAMES=(${SERVERS:-base eagle3 adaptive hook_bs hook_default})
declare -A PORT=([base]=30000 [eagle3]=30100 [adaptive]=30200 [hook_bs]=30300 [hook_default]=30400
                 [eagle3_traced]=30500 [hook_broken]=30600)
declare -A PYPATH=([base]=$SITE [eagle3]=$SITE [adaptive]=$SITE
                   [hook_bs]="$PWD/$HOOKS/hook_bs:$SITE" [hook_default]="$PWD/$HOOKS/hook_default:$SITE"
                   [eagle3_traced]="$PWD/$HOOKS/trace_only:$SITE" [hook_broken]="$PWD/$HOOKS/hook_broken:$SITE")
declare -A EXTRA=([base]="" [eagle3]="" [adaptive]="--speculative-adaptive --speculative-adaptive-config $RECIPE/adaptive_max3.json"
                  [hook_bs]="" [hook_default]="" [eagle3_traced]="" [hook_broken]="")
i=0
for n in "${NAMES[@]}"; do  # a server named after a directory of $HOOKS runs with that hook
  i=$((i + 1))
  [ -n "${PORT[$n]:-}" ] || PORT[$n]=$((31000 + 100 * i))
  [[ "$n" == base* ]] && PYPATH[$n]=$SITE
  if [ -z "${PYPATH[$n]:-}" ]; then
    [ -e "$HOOKS/$n/sgtrace_hook.json" ] \
      || { log "MISSING $HOOKS/$n: run bench/live/prepare_hook_check.py"; exit 2; }
    PYPATH[$n]="$PWD/$HOOKS/$n:$SITE"
  fi
done
cleanup() { for n in "${NAMES[@]}"; do stop_server "$n"; done; }
mark() {  # mark NAME PHASE: how many log lines the server has written when PHASE starts
  echo "{\"label\": \"$1\", \"phase\": \"$2\", \"log_lines\": $(wc -l < "$LOGS/server_$1.log")}" >> "$OUT/results.jsonl"
}
trap cleanup EXIT

log "== start ${NAMES[*]}"
for n in "${NAMES[@]}"; do
  spec=(); [[ "$n" != base* ]] && spec=("${SPEC[@]}")  # base, base2, ...: no speculation
  # shellcheck disable=SC2086
  start_server "$n" "$LOGS/server_$n.log" "${PYPATH[$n]}" -- "${COMMON[@]}" --port "${PORT[$n]}" \
    "${spec[@]}" ${EXTRA[$n]:-}
done
wait_ready "$READY_TIMEOUT_S" "$LOGS" "${NAMES[@]}"
for n in "${NAMES[@]}"; do
  [ "${READY[$n]:-dead}" = dead ] && continue
  echo "{\"label\": \"$n\", \"server_ready_s\": ${READY[$n]}, \"started_together\": ${#NAMES[@]}}" >> "$OUT/results.jsonl"
done
grep -h "sgtrace-hook\|Built adaptive runtime state\|Capture" "$LOGS"/server_hook_*.log | head -20 | sed 's/^/  /' >> "$OUT/run.log"

for n in "${NAMES[@]}"; do
  if [ "${READY[$n]:-}" = "" ] || [ "${READY[$n]}" = dead ]; then stop_server "$n"; continue; fi
  if [ "$(left)" -lt 40 ]; then log "SKIP $n: only $(left)s left"; stop_server "$n"; continue; fi
  for pass in serial burst; do
    mark "$n" "$pass"
    log "== $n: greedy outputs, $pass"
    timeout 90 python3 "$HERE/greedy_check.py" --port "${PORT[$n]}" --label "$n" --pass "$pass" \
      --out "$OUT/greedy.jsonl" 2>&1 | tee -a "$OUT/run.log"
  done
  conc=${LOAD_CONC:-1,8,64}; reqs=${LOAD_REQS:-8,32,128}
  [ "$n" = hook_bs ] && [ -z "${LOAD_CONC:-}" ] && conc=1,8,64,1 && reqs=8,32,128,8
  lt=$(( ($(left) - 30) / 4 )); [ $lt -gt 25 ] && lt=25
  mark "$n" load
  log "== $n: load at concurrency $conc (level timeout ${lt}s)"
  PYTHONPATH=$SITE timeout $(( 5 * lt + 40 )) python3 "$RECIPE/load.py" --port "${PORT[$n]}" \
    --label "$n" --conc "$conc" --requests "$reqs" --max-new 64 --level-timeout "$lt" \
    --out "$OUT/results.jsonl" 2>&1 | tee -a "$OUT/run.log"
  sleep 1
  mark "$n" end
  stop_server "$n"
done

log "== report"
python3 "$HERE/hook_check_report.py" --out "$OUT" --logs "$LOGS" --labels "$(IFS=,; echo "${NAMES[*]}")" 2>&1 | tee -a "$OUT/run.log"
tar -C "$LOGS" -czf "$OUT/servers.tgz" .
# traces written by the tracer joined to the hook directories (prepare_hook_check.py --trace)
ls $HOOKS/*/events-*.jsonl >/dev/null 2>&1 && tar -czf "$OUT/traces.tgz" $HOOKS/*/events-*.jsonl $HOOKS/*/*.json
(cd "$JITC" && find tvm-ffi -name "*.so" > /tmp/jitlist && find triton -type f >> /tmp/jitlist \
  && tar -czf "$OUT/jitcache.tgz" -T /tmp/jitlist)
if [ "$(stat -c %s "$OUT/jitcache.tgz")" -gt $((15*1024*1024)) ]; then
  (cd "$JITC" && find tvm-ffi -name "*.so" | tar -czf "$OUT/jitcache.tgz" -T -)
fi
log "== done"
