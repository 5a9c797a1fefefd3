#!/usr/bin/env bash
# Exact greedy outputs through forced switches, on the copy model, in ONE device call (issue 20).
#
# Before (on your machine):
#   PYTHONPATH=src python bench/live/prepare_hook_check.py --plain --trace \
#     --trace-only plain_k384 plain_k384c --share-payload --out .carry/plain-check
#   bash ../shared/live-sglang/bundle.sh                         # .carry/live-sglang
# Device call, carry [".carry/live-sglang", ".carry/plain-check"]:  bash bench/live/copy_check.sh
# The re-entry run (a draft that reads its own KV 8 positions back, so a cold start shows; see
# bench/live/README.md): SERVERS="plain_k384 plain_k384c ..." COPY_MODEL_ARGS="--draft-lag 8"
# Another release, from a probe carry (prepare_probe_release.py: base, sglang-kernel, the release;
# unpacked as probe_release.sh does) with hook directories generated for it, e.g. SGLang 0.5.13:
#   PYTHONPATH=src python bench/live/prepare_hook_check.py --plain --source sglang==0.5.13 \
#     --share-payload --out .carry/probe013/plain-check
# Device call, carry [".carry/probe013"]:  RECIPE=.carry/probe013 HOOKS=.carry/probe013/plain-check \
#   SERVERS="..." bash bench/live/copy_check.sh      (bench/results/live/plain_0.5.13/README.md)
#
# The copy model (make_copy_model.py: next = seq[-D] + 1, decided by layer 0's attention, no
# near-ties; D = 2, or L + 1 with --draft-lag L; COPY_MODEL_ARGS: the builder's options, D is
# read back from its models.json) makes every greedy output known in advance. Servers started
# together, then one at a time (the others idle), copy_check.py's phases: serial, burst, load
# with aborts; KV in use read back after each phase (must be 0). base = no speculation,
# eagle3 = EAGLE-3 alone, plain_kK = EAGLE-3 + the hook in the plain off state switching every K
# decode results,
# plain_k7_tight = plain_k7 with a KV pool so small that admission stops (suffixes: below),
# plain_k384 (tracer joined): the re-entry run (accept length after each switch on),
# plain_k384c: the same with the catch-up (the draft KV of the tokens decoded while off). Last,
# plain_k1 keeps going: the toggle storm, until the deadline. copy_check_report.py writes the
# verdict. Comes back in $OUT: run.log copy.jsonl copy_check.md copy_check.json servers.tgz
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/copy-check-out}
mkdir -p "$OUT"
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
RECIPE=${RECIPE:-.carry/live-sglang}
HOOKS=${HOOKS:-.carry/plain-check}
HERE=bench/live
MODEL=${MODEL:-/tmp/copy}
LOGS=${LOGS:-/tmp/copy-logs}
mkdir -p "$LOGS"
. "$HERE/device_env.sh"
# shellcheck disable=SC2046
hook_dirs_ready "$HOOKS" $(carry_needs "$RECIPE") "$HOOKS/plain_k1/sgtrace_hook.json" || exit 2
device_env
install_carry "$HOOKS/jitcache.tgz"  # the bundle, or a probe carry's base and release: SGPATH
log "== copy model"
# shellcheck disable=SC2086
PYTHONPATH=$SITE python3 "$HERE/make_copy_model.py" "$MODEL" --check ${COPY_MODEL_ARGS:-} \
  >> "$OUT/run.log" 2>&1 || { log "model build failed"; exit 3; }
read -r OFFSET VOCAB < <(python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))
print(m["offset"], m["vocab"])' "$MODEL/models.json") || { log "no $MODEL/models.json"; exit 3; }
log "copy model: next = seq[-$OFFSET] + 1 (mod $VOCAB), builder options: ${COPY_MODEL_ARGS:-none}"

COMMON=(--model-path "$MODEL/target" --attention-backend triton --host 127.0.0.1
        --mem-fraction-static 0.6 --max-running-requests 64 --cuda-graph-max-bs 64
        $PREFILL_GRAPH_OFF --sampling-backend pytorch --grammar-backend none
        --log-level info --sleep-on-idle)
SPEC=(--speculative-algorithm EAGLE3 --speculative-draft-model-path "$MODEL/draft"
      --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4)
NAMES=(${SERVERS:-base eagle3 plain_k2 plain_k7 plain_k64 plain_k7_tight plain_k384 plain_k1})
# A name is base, eagle3 or a hook directory (plain_kK), with at most one suffix:
#   _tight    a 3072-token KV pool (admission stops for lack of room)
#   _squeeze  the same pool, admitted as if requests stopped early (--schedule-conservativeness
#             0.05): decode runs out of KV and SGLang retracts ("KV cache pool is full")
#   _retract  SGLang's own retraction forced every 5 forwards (SGLANG_TEST_RETRACT)
declare -A PORT HOOK ARGS SENV CORE
i=0
for n in "${NAMES[@]}"; do
  i=$((i + 1)); PORT[$n]=$((${PORT_BASE:-30000} + 100 * i)); ARGS[$n]="--max-total-tokens 65536"; SENV[$n]=""
  core=$n
  case $n in
    *_tight) core=${n%_tight}; ARGS[$n]="--max-total-tokens 3072" ;;
    *_squeeze) core=${n%_squeeze}; ARGS[$n]="--max-total-tokens 3072 --schedule-conservativeness 0.05" ;;
    *_retract) core=${n%_retract}; SENV[$n]="SGLANG_TEST_RETRACT=1 SGLANG_TEST_RETRACT_INTERVAL=5" ;;
  esac
  CORE[$n]=$core
  case $core in base|eagle3) HOOK[$n]="" ;; *) HOOK[$n]=$core ;; esac
done
cleanup() { for n in "${NAMES[@]}"; do stop_server "$n"; done; }
trap cleanup EXIT

log "== start ${NAMES[*]}"
for n in "${NAMES[@]}"; do
  spec=(); [ "${CORE[$n]}" != base ] && spec=("${SPEC[@]}")
  path=$SGPATH; [ -n "${HOOK[$n]}" ] && path="$(cd "$HOOKS/${HOOK[$n]}" && pwd):$SGPATH"
  # shellcheck disable=SC2086
  start_server "$n" "$LOGS/server_$n.log" "$path" ${SENV[$n]} -- "${COMMON[@]}" \
    --port "${PORT[$n]}" "${spec[@]}" ${ARGS[$n]}
done
wait_ready 300 "$LOGS" "${NAMES[@]}"

for n in "${NAMES[@]}"; do
  if [ "${READY[$n]:-dead}" = dead ]; then stop_server "$n"; continue; fi
  if [ "$(left)" -lt 30 ]; then log "SKIP $n: only $(left)s left"; stop_server "$n"; continue; fi
  phases=serial,burst,load; extra=()
  case $n in plain_k384|plain_k384c) phases=serial,storm; extra=(--storm-s 45 --conc 16) ;; esac
  if [ "$n" = "${NAMES[-1]}" ] && [[ "$n" == plain_k* ]]; then
    phases=serial,burst,load,storm; extra=(--storm-s $(( $(left) - 75 )))
  fi
  log "== $n: $phases ${extra[*]}"
  timeout $(( $(left) - 10 )) python3 "$HERE/copy_check.py" --port "${PORT[$n]}" --label "$n" \
    --vocab "$VOCAB" --offset "$OFFSET" --phases "$phases" "${extra[@]}" --out "$OUT/copy.jsonl" 2>&1 \
    | tee -a "$OUT/run.log"
  sleep 1
  stop_server "$n"
done

log "== report"
python3 "$HERE/copy_check_report.py" --results "$OUT/copy.jsonl" --logs "$LOGS" \
  --traces "$HOOKS" --model "$MODEL/models.json" --out "$OUT" 2>&1 | tee -a "$OUT/run.log"
tar -C "$LOGS" -czf "$OUT/servers.tgz" .
log "== done"
