#!/usr/bin/env bash
# The live benchmark (issue #5), one device call: the synthetic EAGLE-3 pair of
# make_synth_models.py, servers started together on the one GPU, then one at a time: greedy
# outputs of a fixed prompt set and a closed-loop concurrency sweep (sweep_load.py).
#
#   bash bench/live/sweep.sh [PLAN] [--set SECTION.KEY=VALUE ...]
#
# PLAN is a TOML sweep plan (default bench/live/plans/default.toml, which lists every key with
# its default); bench/live/sweep_plan.py checks it and resolves it, and this script reads only
# the resolved values (the environment changes nothing here but $OUT, where the device wants
# the results). A plan without an A/A pair (two identical servers) or one that would not end
# within its limits.deadline_s is refused: check it here first with
#   python3 bench/live/sweep_plan.py PLAN --estimate
# --set changes one key for this run, e.g.
#   bash bench/live/sweep.sh bench/live/plans/default.toml --set 'load.concurrency=[1, 64]'
#
# Before (on your machine): bash ../shared/live-sglang/bundle.sh
#   and, for hook servers, python bench/live/prepare_sweep.py --policy FILE (writes .carry/sweep)
# Device call, from the repo root, carry [".carry/live-sglang", ".carry/sweep"].
# What the servers are (servers.list: KIND[:DRAFT][@tiny][+R]): sweep_plan.py's SERVER_KINDS.
# profile.servers: after the sweeps, a torch-profiler GPU profile of 20 steps at
# profile.concurrency for each, then (profile.host_side) one of 8 steps with the host side and
# Python stacks (profile.jsonl via profile_summary.py). host.monitor: host_monitor.py's CPU
# probe before the servers start, then busy threads and CPUs (host.jsonl; pgids.txt names each
# server's process group) and nvidia-smi's clocks and power (gpu.csv) through the sweeps, all in
# servers.tgz; monitor_report.py joins them to the sweep's turns.
# Comes back in $OUT (the device returns 8 files at most: do not add more there):
# run.log (the resolved plan first) sweep.jsonl greedy.jsonl models.json servers.tgz traces.tgz
# profile.jsonl (the load lines and the kernel summaries of the profiles, the kernel check's
# lines) prof.tgz (profile.raw) jitcache.tgz (only when none was carried)
set -u
HERE=bench/live
LOW_MEM_GB=8  # a server left less GPU memory after start-up is said LOW in run.log (call 61)
PLAN=bench/live/plans/default.toml
case ${1:-} in ""|--*) ;; *) PLAN=$1; shift ;; esac
OUT=${OUT:-/tmp/sweep-out}
mkdir -p "$OUT"
T0=$(date +%s)
resolved=$(python3 "$HERE/sweep_plan.py" "$PLAN" --print-env "$@") || { echo "sweep.sh: the plan $PLAN cannot run (above)" >&2; exit 2; }
eval "$resolved"
mkdir -p "$LOGS"
# a warm machine keeps the last call's logs folder: the monitors' files start afresh each call
# (appended to, they held every earlier call's servers and samples: calls 61-65)
rm -f "$LOGS/topology.jsonl" "$LOGS/host.jsonl" "$LOGS/pgids.txt"
. "$HERE/device_env.sh"
{ echo "== plan $PLAN $*"; python3 "$HERE/sweep_plan.py" "$PLAN" "$@"; } >> "$OUT/run.log"
[ -e "$RECIPE/site.tar.xz" ] || { log "MISSING $RECIPE/site.tar.xz: run ../shared/live-sglang/bundle.sh and carry .carry/live-sglang"; exit 2; }
device_env
install_bundle "$RECIPE/jitcache.tgz" "$CARRY/jitcache.tgz" "$CARRY/jitcache.txz"

MODELS=/dev/shm/synth
[ "$(df -k --output=avail /dev/shm | tail -1)" -gt 20000000 ] || MODELS=/tmp/synth
log "== synthetic models in $MODELS"
accept=(); for a in ${ACCEPT}; do accept+=(--accept "$a"); done
PYTHONPATH=$SITE python3 "$HERE/make_synth_models.py" "$MODELS" --layers "${LAYERS}" \
  "${accept[@]}" --check > "$OUT/models.json" 2>> "$OUT/run.log" || { log "model build failed"; exit 3; }
log "models: $(cat "$OUT/models.json")"
VOCAB=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab'])" "$OUT/models.json")

TINY=/tmp/tiny
case " ${SERVERS} " in *@tiny*)
  PYTHONPATH=$SITE python3 "$RECIPE/make_tiny_models.py" "$TINY" --corpus-dir "$SITE/sglang/srt/managers" \
    >> "$OUT/run.log" 2>&1 || { log "tiny model build failed"; exit 3; } ;;
esac
COMMON=(--attention-backend triton --host 127.0.0.1
        --mem-fraction-static 0.88 --max-total-tokens 32768 --max-running-requests 128
        --cuda-graph-bs 1 2 4 8 16 32 64 128 --disable-prefill-cuda-graph
        --sampling-backend pytorch --grammar-backend none --log-level info --sleep-on-idle)
# SGLang's front process (HTTP and tokenizer) logs a garbage collection longer than GC_WARNING_S:
# its 0.4-0.5 s bursts inside a turn (host.jsonl) were such collections of generation 2 (call 74).
# Asked only of an SGLang that defines it (0.5.9-0.5.19 in server_args.py, later in arg_groups/)
if [ "$(awk -v s="${GC_WARNING_S}" 'BEGIN { print (s > 0) }')" = 1 ]; then
  if grep -rqs --include='*.py' gc_warning_threshold_secs "$SITE/sglang/srt/server_args.py" "$SITE/sglang/srt/arg_groups"; then
    COMMON+=(--gc-warning-threshold-secs "${GC_WARNING_S}")
  else
    log "host.gc_warning_s: this SGLang has no --gc-warning-threshold-secs; its collections go unlogged"
  fi
fi
SPEC_ARGS=(--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1
           --speculative-num-draft-tokens 4)
NAMES=(); declare -A PORT ARGS PYPATH SENV SVOCAB
i=0
for spec in ${SERVERS}; do
  again=""; case $spec in *+*) again=${spec##*+}; spec=${spec%+*} ;; esac
  model=${spec#*@}; [ "$model" = "$spec" ] && model=synth; spec=${spec%@*}
  kind=${spec%%:*}; draft=${spec#*:}; [ "$draft" = "$spec" ] && draft=""
  n=$kind${draft:+-$draft}; [ "$model" = tiny ] && n=$kind-tiny
  n+=${again:++$again}
  NAMES+=("$n"); PORT[$n]=$((30000 + 100 * i)); i=$((i + 1))
  PYPATH[$n]=$SITE; SENV[$n]=""; SVOCAB[$n]=$VOCAB; ARGS[$n]="--model-path $MODELS/target"
  [ "$model" = tiny ] && { ARGS[$n]="--model-path $TINY/target"; SVOCAB[$n]=4096; }
  if [ "$kind" != base ]; then
    draft_path=$MODELS/draft-$draft; [ "$model" = tiny ] && draft_path=$TINY/draft
    ARGS[$n]+=" ${SPEC_ARGS[*]} --speculative-draft-model-path $draft_path"
  fi
  dir=""  # the folder of .carry/sweep the server runs with, and its environment
  case $kind in
    adaptive) ARGS[$n]+=" --speculative-adaptive --speculative-adaptive-config $RECIPE/adaptive_max3.json" ;;
    hook|hooktraced|plainoff|cal) dir=$kind ;;
    eagle3traced) dir=traced ;;
  esac
  # a hook server of draft D runs with its own policy where prepare_sweep.py wrote hook-D
  [ "$dir" = hook ] && [ -n "$draft" ] && [ -d "$CARRY/hook-$draft" ] && dir=hook-$draft
  if [ -n "$dir" ]; then
    [ -d "$CARRY/$dir" ] || { log "MISSING $CARRY/$dir: run bench/live/prepare_sweep.py"; exit 2; }
    PYPATH[$n]="$(cd "$CARRY/$dir" && pwd):$SITE"  # paths.carry relative or absolute
  fi
done
trap 'for n in "${NAMES[@]}"; do stop_server "$n"; done' EXIT

{ echo "== topology"; lscpu 2>/dev/null | grep -Ei "^(model name|numa|cpu\(s\)|thread|core|socket)"; nvidia-smi topo -m 2>/dev/null; } >> "$OUT/run.log"
if [ "${MONITOR}" = 1 ]; then  # the CPUs' SMT siblings, as sysfs says and as measured
  log "== CPU probe (host_monitor.py topology)"
  timeout 60 python3 "$HERE/host_monitor.py" topology --probe-s "${PROBE_S}" \
    --out "$LOGS/topology.jsonl" 2>> "$OUT/run.log"
fi
if [ "${PIN}" = 1 ]; then  # each server on its own share of the CPUs (the load is not pinned)
  per=$(( $(nproc) / ${#NAMES[@]} ))
  j=0; for n in "${NAMES[@]}"; do CPUS[$n]="$((j * per))-$((j * per + per - 1))"; j=$((j + 1)); done
  [ "$per" -ge 1 ] || CPUS=()
elif [ "${PIN}" = gpu ]; then  # every server on the GPU's NUMA node (one server runs at a time)
  local_cpus=$(gpu_local_cpus)
  for n in "${NAMES[@]}"; do CPUS[$n]=$local_cpus; done
  [ -n "$local_cpus" ] || log "PIN=gpu: the GPU's NUMA node is unknown here; servers not pinned"
fi
pins=""; [ "$PIN" = 0 ] || pins=" (PIN=$PIN: $(for n in "${NAMES[@]}"; do printf '%s:%s ' "$n" "${CPUS[$n]:-any}"; done))"
log "== start ${NAMES[*]}$pins"
for n in "${NAMES[@]}"; do
  # Each server its own Triton cache, seeded from the shared (carried) one: Triton compiles a
  # kernel again for each new specialization of its arguments (an integer divisible by 16, or 1),
  # which a wave's request lengths meet now and then in a scored turn. With one shared cache the
  # first server to meet one paid the compile (50-200 ms) and the servers after it read the
  # result: the slow turns of calls 54, 69 and 70 (the hook's at rep 4, EAGLE-3's at rep 1: each
  # the first speculating server of its rep, the cache's assign_req_to_token_pool written then).
  # Now every server pays its own, in the same rep, and the pair's ratio keeps none of it.
  rm -rf "$JITC/triton-$n"; cp -Rp "$JITC/triton" "$JITC/triton-$n"  # -p: a compile is newer than T0
  # shellcheck disable=SC2086
  start_server "$n" "$LOGS/server_$n.log" "${PYPATH[$n]}" ${SENV[$n]} "TRITON_CACHE_DIR=$JITC/triton-$n" \
    -- "${COMMON[@]}" --port "${PORT[$n]}" ${ARGS[$n]}
done
wait_ready "${READY_TIMEOUT_S}" "$LOGS" "${NAMES[@]}"
for n in "${NAMES[@]}"; do  # what SGLang left free after its graphs: a wave's prefill needs some
  mem=$(grep -o "available_gpu_mem=[0-9.]*" "$LOGS/server_$n.log" 2>/dev/null | tail -1 | cut -d= -f2)
  if [ -n "$mem" ] && awk -v m="$mem" -v t="$LOW_MEM_GB" 'BEGIN { exit !(m < t) }'; then
    log "LOW GPU MEMORY $n: ${mem} GB left after start-up (under ${LOW_MEM_GB}); a large batch may run it out of memory: start fewer servers together (five on an 80 GB card left 3.1 GB each; the A/A replica died at its first wave of 128)"
  fi
done
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$OUT/run.log" 2>&1
for n in "${NAMES[@]}"; do
  echo "{\"label\": \"$n\", \"server_ready_s\": \"${READY[$n]:-timeout}\", \"started_together\": ${#NAMES[@]}}" >> "$OUT/sweep.jsonl"
done

MONITORS=()
if [ "${MONITOR}" = 1 ]; then  # during the sweeps: busy threads and CPUs, GPU clocks and power
  for n in "${NAMES[@]}"; do echo "$n ${PID[$n]:-}" >> "$LOGS/pgids.txt"; done
  python3 "$HERE/host_monitor.py" sample --out "$LOGS/host.jsonl" 2>> "$OUT/run.log" &
  MONITORS+=($!)
  reasons=clocks_event_reasons.active
  nvidia-smi --help-query-gpu 2>/dev/null | grep -q "$reasons" || reasons=clocks_throttle_reasons.active
  TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,$reasons \
    --format=csv -lms 250 > "$LOGS/gpu.csv" 2>> "$OUT/run.log" &
  MONITORS+=($!)
fi
LOAD=(--vocab "$VOCAB" --window-s "${WINDOW_S}" --windows "${WINDOWS}" --warmup-s "${WARMUP_S}"
      --max-new "${MAX_NEW}" --max-new-spread "${MAX_NEW_SPREAD}"
      --stream-interval "${STREAM_INTERVAL}" --fixed "${FIXED}" --fixed-tokens "${FIXED_TOKENS}"
      --out "$OUT/sweep.jsonl")
[ "${FIXED_BATCH}" = 1 ] && LOAD+=(--fixed-batch)
turns=()  # LABEL=PORT of the servers that take turns (REPS)
for round in $(seq 1 "$ROUNDS"); do
for n in "${NAMES[@]}"; do
  [[ " ${PROFILE_ONLY} " == *" $n "* ]] && continue
  if [ "${READY[$n]:-}" = "" ] || [ "${READY[$n]}" = dead ]; then stop_server "$n"; continue; fi
  if [ "$(left)" -lt 30 ]; then log "SKIP $n: only $(left)s left"; stop_server "$n"; continue; fi
  if [ "$round" = 1 ]; then
    log "== $n: greedy"
    PYTHONPATH=$SITE timeout 60 python3 "$HERE/sweep_load.py" --port "${PORT[$n]}" --label "$n" \
      --vocab "${SVOCAB[$n]}" --greedy 16 --out "$OUT/greedy.jsonl" 2>&1 | tee -a "$OUT/run.log"
    [ "${FREEZE_GC}" = 1 ] && freeze_gc "$n" "${PORT[$n]}"
  fi
  case $n in *-tiny|*-tiny+*) stop_server "$n"; continue ;; esac
  if [ "$REPS" -gt 0 ]; then turns+=("$n=${PORT[$n]}"); continue; fi
  conc=${CONC}
  [ "$round" -gt 1 ] && conc=$CONC_REPEAT
  case $n in *traced*) conc=$CONC_TRACED ;; esac
  log "== $n: sweep $conc (round $round of $ROUNDS)"
  echo "{\"label\": \"$n\", \"phase\": \"sweep\", \"round\": $round, \"log_lines\": $(wc -l < "$LOGS/server_$n.log")}" >> "$OUT/sweep.jsonl"
  PYTHONPATH=$SITE timeout $(( $(left) - 10 )) python3 "$HERE/sweep_load.py" --port "${PORT[$n]}" \
    --label "$n" --conc "$conc" "${LOAD[@]}" --tag "${TAG}round$round" 2>&1 | tee -a "$OUT/run.log"
  [ "$round" = "$ROUNDS" ] && [[ " ${PROFILE} " != *" $n "* ]] && stop_server "$n"
done
done
if [ "${#turns[@]}" -gt 0 ]; then
  conc=${CONC}
  log "== turns at each level of $conc, $REPS each after $WARMUP_TURNS unscored: ${turns[*]}"
  for t in "${turns[@]}"; do
    echo "{\"label\": \"${t%=*}\", \"phase\": \"sweep\", \"reps\": $REPS, \"log_lines\": $(wc -l < "$LOGS/server_${t%=*}.log")}" >> "$OUT/sweep.jsonl"
  done
  PYTHONPATH=$SITE timeout $(( $(left) - 10 )) python3 "$HERE/sweep_load.py" \
    --targets "$(IFS=,; echo "${turns[*]}")" --reps "$REPS" --warmup-turns "$WARMUP_TURNS" --conc "$conc" "${LOAD[@]}" \
    --tag "${TAG}turns" 2>&1 | tee -a "$OUT/run.log"
  for t in "${turns[@]}"; do [[ " ${PROFILE} " != *" ${t%=*} "* ]] && stop_server "${t%=*}"; done
fi
profile_server() {  # profile_server NAME: GPU kernels of 20 decode steps at PROFILE_CONC, then
  # (PROFILE_CPU=1) 8 steps with the host side too: who launched each kernel, host time per frame
  local n=$1 port=${PORT[$1]} lp cpu=${PROFILE_CPU}
  PYTHONPATH=$SITE python3 "$HERE/sweep_load.py" --port "$port" --label "$n" --vocab "$VOCAB" \
    --conc "${PROFILE_CONC}" --warmup-s 1 --window-s $(( cpu == 1 ? 16 : 8 )) --windows 1 --tag profile --out "$OUT/profile.jsonl" &
  lp=$!
  sleep 3
  local acts='"GPU"'; [ "${PROFILE_RAW}" = 1 ] && acts='"CPU", "GPU"'
  start_profile "$port" "/tmp/prof/$n" 20 "\"activities\": [$acts]"
  if [ "$cpu" = 1 ]; then
    sleep 5
    start_profile "$port" "/tmp/prof/$n-cpu" 8 '"activities": ["CPU", "GPU"], "with_stack": true, "record_shapes": true'
  fi
  wait "$lp"
  for _ in $(seq 1 30); do  # the traces are written after the profiled steps
    ls /tmp/prof/$n/*.json* >/dev/null 2>&1 && { [ "$cpu" != 1 ] || ls /tmp/prof/$n-cpu/*.json* >/dev/null 2>&1; } && break
    sleep 1
  done
  sleep 3
  python3 "$HERE/profile_summary.py" "/tmp/prof/$n" --label "$n" --steps 20 >> "$OUT/profile.jsonl" 2>> "$OUT/run.log"
  [ "$cpu" = 1 ] && python3 "$HERE/profile_summary.py" "/tmp/prof/$n-cpu" --label "$n-cpu" --steps 8 >> "$OUT/profile.jsonl" 2>> "$OUT/run.log"
}
start_profile() {  # start_profile PORT DIR STEPS JSON_FIELDS: SGLang's /start_profile
  python3 - "$1" "$2" "$3" "$4" <<'PY' >> "$OUT/run.log" 2>&1
import json, sys, urllib.request
body = json.loads('{"output_dir": "%s", "num_steps": %s, %s}' % tuple(sys.argv[2:5]))
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/start_profile",
                             data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(req, timeout=60).read().decode().strip())
PY
}
for n in ${PROFILE}; do
  if [ "${READY[$n]:-}" = "" ] || [ "${READY[$n]}" = dead ] || [ "$(left)" -lt 40 ]; then continue; fi
  log "== $n: GPU profile at concurrency ${PROFILE_CONC}"
  profile_server "$n"
  stop_server "$n"
done
if [ "${KERNELS}" = 1 ] && [ "$(left)" -gt 30 ]; then
  log "== attention kernels of a one-token verify"
  PYTHONPATH=$SITE timeout $(( $(left) - 10 )) python3 "$HERE/splitkv_check.py" \
    >> "$OUT/profile.jsonl" 2>> "$OUT/run.log" || log "kernel check failed"
fi
log "== pack"
for m in "${MONITORS[@]}"; do kill "$m" 2>/dev/null; done
for n in "${NAMES[@]}"; do  # when each server compiled a kernel (monitor_report.py's jit), then merged
  [ -d "$JITC/triton-$n" ] || continue
  find "$JITC/triton-$n" -type f -name '*.cubin' -newermt "@$T0" -printf '%T@ %P\n' | sort -n > "$LOGS/jit-$n.txt"
  cp -Rn "$JITC/triton-$n/." "$JITC/triton/"
done
# what this call wrote only: a warm machine keeps the earlier calls' server logs in $LOGS
(cd "$LOGS" && find . -type f -newermt "@$T0" -print0 | tar --null -czf "$OUT/servers.tgz" -T -) 2>/dev/null
[ "${PROFILE_RAW}" = 1 ] && [ -d /tmp/prof ] && tar -C /tmp/prof -czf "$OUT/prof.tgz" .
ls "$CARRY"/*/events-*.jsonl >/dev/null 2>&1 && tar -czf "$OUT/traces.tgz" "$CARRY"/*/events-*.jsonl "$CARRY"/*/*.json
[ -f "$RECIPE/jitcache.tgz" ] || [ -f "$CARRY/jitcache.tgz" ] || [ -f "$CARRY/jitcache.txz" ] || tar -C "$JITC" --exclude='./triton-*' -czf "$OUT/jitcache.tgz" . 2>/dev/null
log "done"
