#!/usr/bin/env bash
# The live benchmark (issue #5), one device call: the synthetic EAGLE-3 pair of
# make_synth_models.py, servers started together on the one GPU, then one at a time: greedy
# outputs of a fixed prompt set and a closed-loop concurrency sweep (sweep_load.py).
#
# Before (on your machine): bash ../shared/live-sglang/bundle.sh
#   and, for hook servers, python bench/live/prepare_sweep.py --policy FILE (writes .carry/sweep)
# Device call, from the repo root, carry [".carry/live-sglang", ".carry/sweep"]:
#   SERVERS="base eagle3:high eagle3:low adaptive:high" bash bench/live/sweep.sh
# SERVERS: KIND[:DRAFT] with KIND base | eagle3 | adaptive (upstream --speculative-adaptive,
# capped config) | hook (EAGLE-3 + the sgtrace hook, .carry/sweep/hook) | hooktraced (the
# same with the tracer, .carry/sweep/hooktraced) | hookoff (the hook held off at every batch
# size, .carry/sweep/hookoff; its one-token verify attends as a decode) | hookoffup (the same
# on upstream's extend kernel, .carry/sweep/hookoffup) | hookoffskip (hookoff with upstream's experimental
# SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1: off without the draft extend) | hookcold (hook with
# that variable: the draft's KV cache is not kept current while off) | hookcoldup (hookcold with
# upstream's off step instead of the lean one, .carry/sweep/hookup) | eagle3traced (the
# tracer alone, .carry/sweep/traced); DRAFT names a draft built by make_synth_models.py
# (ACCEPT; high, low by default); a suffix +R starts a second server of the same configuration
# (label KIND-DRAFT+R: a replica, the noise between servers; base:X does that for base). hook:D
# and hookcold:D run with .carry/sweep/hook-D where
# prepare_sweep.py --draft-policy D=FILE wrote it (a policy calibrated for that draft).
# KIND@tiny: the same server on the recipe's tiny random pair (make_tiny_models.py: its attention
# decides its outputs, unlike the synthetic target's), greedy outputs only, no sweep.
# PROFILE (names): after the sweeps, a torch-profiler GPU profile of 20 steps at concurrency
# PROFILE_CONC (64) for each, then (PROFILE_CPU=1, the default) one of 8 steps with the host side and Python
# stacks (profile.jsonl via profile_summary.py); PROFILE_ONLY (names): profiled, not swept.
# PROFILE_RAW (0): 1 = the first profile records the host side too (CPU ops and CUDA runtime
# calls, no stacks: little overhead), and every raw trace comes back in prof.tgz.
# KERNELS (0): 1 = at the end, splitkv_check.py's attention kernel check (lines in profile.jsonl).
# ROUNDS (1): sweep the servers round-robin this many times (interleaved A B A B); CONC_REPEAT
# (CONC): the levels of rounds 2 and later (the noisy high-concurrency ones, say).
# REPS (0): instead of rounds, the servers take turns at each level, REPS times, the order
# rotated (sweep_load.py --targets --reps): the servers compared at a level are measured
# within a minute of each other, not a whole sweep apart.
# STREAM_INTERVAL (32): the load streams, a chunk every N tokens, and a window counts the
# tokens that arrived in it (0: no streaming, tokens spread over each request's lifetime).
# MAX_SERVERS (7): refuse more synthetic servers than fit on the GPU together.
# PIN (0): 1 = each server's processes on their own equal share of the CPUs (taskset; call 12:
# four CPUs a server widened the noise); gpu = every server on the CPUs of the GPU's NUMA node
# (sysfs local_cpulist), so that none runs its host side far from the GPU. run.log records the
# CPU and GPU topology either way.
# MONITOR (1): host_monitor.py measures which CPUs slow each other (topology.jsonl; PROBE_S,
# 0.1 s a pair of CPUs, 0: sysfs only) before the servers start, then samples the busy threads
# and CPUs (host.jsonl; pgids.txt names each server's process group) and nvidia-smi the GPU's
# clocks and power (gpu.csv) through the sweeps, all in servers.tgz; monitor_report.py joins
# them to the sweep's turns.
# Other knobs: CONC (1,2,4,8,16,32,64,128), CONC_TRACED (CONC for *traced servers), WINDOW_S, WINDOWS, WARMUP_S, MAX_NEW,
# MAX_NEW_SPREAD (0: every request MAX_NEW tokens; 0.5: 0.5-1.5x, desynchronised), DEADLINE_S,
# LAYERS (target depth, 32), ACCEPT ("high=0.9 low=0.17").
# Comes back in $OUT (the device returns 8 files at most: do not add more there):
# run.log sweep.jsonl greedy.jsonl models.json servers.tgz traces.tgz profile.jsonl (the load
# lines and the kernel summaries of PROFILE, the KERNELS lines) prof.tgz (PROFILE_RAW) jitcache.tgz (only when none
# was carried)
set -u
OUT=${OUT:-/tmp/sweep-out}
mkdir -p "$OUT" "${LOGS:-/tmp/sweep-logs}"
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-560}
RECIPE=${RECIPE:-.carry/live-sglang}
CARRY=${CARRY:-.carry/sweep}
HERE=bench/live
LOGS=${LOGS:-/tmp/sweep-logs}
. "$HERE/device_env.sh"
# one synthetic 7B server holds ~21 GiB (weights, draft, KV pool, graphs): 7 fit in 139 GiB, 8 did
# not (call 8: two died at start-up); the tiny pair's servers are small
big=0; for spec in ${SERVERS:-base eagle3:high eagle3:low adaptive:high}; do [[ $spec == *@tiny* ]] || big=$((big + 1)); done
if [ "$big" -gt "${MAX_SERVERS:-7}" ]; then
  log "TOO MANY servers: $big synthetic 7B servers do not fit on one GPU (at most ${MAX_SERVERS:-7}); split SERVERS over two calls"
  exit 2
fi
[ -e "$RECIPE/site.tar.xz" ] || { log "MISSING $RECIPE/site.tar.xz: run ../shared/live-sglang/bundle.sh and carry .carry/live-sglang"; exit 2; }
device_env
install_bundle "$RECIPE/jitcache.tgz" "$CARRY/jitcache.tgz"

MODELS=/dev/shm/synth
[ "$(df -k --output=avail /dev/shm | tail -1)" -gt 20000000 ] || MODELS=/tmp/synth
log "== synthetic models in $MODELS"
accept=(); for a in ${ACCEPT:-high=0.9 low=0.17}; do accept+=(--accept "$a"); done
PYTHONPATH=$SITE python3 "$HERE/make_synth_models.py" "$MODELS" --layers "${LAYERS:-32}" \
  "${accept[@]}" --check > "$OUT/models.json" 2>> "$OUT/run.log" || { log "model build failed"; exit 3; }
log "models: $(cat "$OUT/models.json")"
VOCAB=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab'])" "$OUT/models.json")

TINY=/tmp/tiny
case " ${SERVERS:-} " in *@tiny*)
  PYTHONPATH=$SITE python3 "$RECIPE/make_tiny_models.py" "$TINY" --corpus-dir "$SITE/sglang/srt/managers" \
    >> "$OUT/run.log" 2>&1 || { log "tiny model build failed"; exit 3; } ;;
esac
COMMON=(--attention-backend triton --host 127.0.0.1
        --mem-fraction-static 0.88 --max-total-tokens 32768 --max-running-requests 128
        --cuda-graph-bs 1 2 4 8 16 32 64 128 --disable-prefill-cuda-graph
        --sampling-backend pytorch --grammar-backend none --log-level info --sleep-on-idle)
SPEC_ARGS=(--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1
           --speculative-num-draft-tokens 4)
NAMES=(); declare -A PORT ARGS PYPATH SENV SVOCAB
i=0
for spec in ${SERVERS:-base eagle3:high eagle3:low adaptive:high}; do
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
  skip=SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1
  case $kind in
    adaptive) ARGS[$n]+=" --speculative-adaptive --speculative-adaptive-config $RECIPE/adaptive_max3.json" ;;
    hook|hooktraced|hookoff) dir=$kind ;;
    hookoffskip) dir=hookoff; SENV[$n]=$skip ;;
    hookcold) dir=hook; SENV[$n]=$skip ;;
    hookcoldup) dir=hookup; SENV[$n]=$skip ;;
    hookoffup) dir=hookoffup ;;
    eagle3traced) dir=traced ;;
  esac
  # a hook server of draft D runs with its own policy where prepare_sweep.py wrote hook-D
  [ "$dir" = hook ] && [ -n "$draft" ] && [ -d "$CARRY/hook-$draft" ] && dir=hook-$draft
  if [ -n "$dir" ]; then
    [ -d "$CARRY/$dir" ] || { log "MISSING $CARRY/$dir: run bench/live/prepare_sweep.py"; exit 2; }
    PYPATH[$n]="$PWD/$CARRY/$dir:$SITE"
  fi
done
trap 'for n in "${NAMES[@]}"; do stop_server "$n"; done' EXIT

{ echo "== topology"; lscpu 2>/dev/null | grep -Ei "^(model name|numa|cpu\(s\)|thread|core|socket)"; nvidia-smi topo -m 2>/dev/null; } >> "$OUT/run.log"
if [ "${MONITOR:-1}" = 1 ]; then  # the CPUs' SMT siblings, as sysfs says and as measured
  log "== CPU probe (host_monitor.py topology)"
  timeout 60 python3 "$HERE/host_monitor.py" topology --probe-s "${PROBE_S:-0.1}" \
    --out "$LOGS/topology.jsonl" 2>> "$OUT/run.log"
fi
if [ "${PIN:-0}" = 1 ]; then  # each server on its own share of the CPUs (the load is not pinned)
  per=$(( $(nproc) / ${#NAMES[@]} ))
  j=0; for n in "${NAMES[@]}"; do CPUS[$n]="$((j * per))-$((j * per + per - 1))"; j=$((j + 1)); done
  [ "$per" -ge 1 ] || CPUS=()
elif [ "${PIN:-0}" = gpu ]; then  # every server on the GPU's NUMA node (one server runs at a time)
  local_cpus=$(gpu_local_cpus)
  for n in "${NAMES[@]}"; do CPUS[$n]=$local_cpus; done
  [ -n "$local_cpus" ] || log "PIN=gpu: the GPU's NUMA node is unknown here; servers not pinned"
fi
log "== start ${NAMES[*]}${PIN:+ (PIN=$PIN: $(for n in "${NAMES[@]}"; do printf '%s:%s ' "$n" "${CPUS[$n]:-any}"; done))}"
for n in "${NAMES[@]}"; do
  # shellcheck disable=SC2086
  start_server "$n" "$LOGS/server_$n.log" "${PYPATH[$n]}" ${SENV[$n]} -- "${COMMON[@]}" --port "${PORT[$n]}" ${ARGS[$n]}
done
wait_ready "${READY_TIMEOUT_S:-330}" "$LOGS" "${NAMES[@]}"
nvidia-smi --query-gpu=memory.used,memory.total --format=csv >> "$OUT/run.log" 2>&1
for n in "${NAMES[@]}"; do
  echo "{\"label\": \"$n\", \"server_ready_s\": \"${READY[$n]:-timeout}\", \"started_together\": ${#NAMES[@]}}" >> "$OUT/sweep.jsonl"
done

MONITORS=()
if [ "${MONITOR:-1}" = 1 ]; then  # during the sweeps: busy threads and CPUs, GPU clocks and power
  for n in "${NAMES[@]}"; do echo "$n ${PID[$n]:-}" >> "$LOGS/pgids.txt"; done
  python3 "$HERE/host_monitor.py" sample --out "$LOGS/host.jsonl" 2>> "$OUT/run.log" &
  MONITORS+=($!)
  reasons=clocks_event_reasons.active
  nvidia-smi --help-query-gpu 2>/dev/null | grep -q "$reasons" || reasons=clocks_throttle_reasons.active
  TZ=UTC nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,$reasons \
    --format=csv -lms 250 > "$LOGS/gpu.csv" 2>> "$OUT/run.log" &
  MONITORS+=($!)
fi
LOAD=(--vocab "$VOCAB" --window-s "${WINDOW_S:-2.5}" --windows "${WINDOWS:-2}" --warmup-s "${WARMUP_S:-1.5}"
      --max-new "${MAX_NEW:-128}" --max-new-spread "${MAX_NEW_SPREAD:-0}"
      --stream-interval "${STREAM_INTERVAL:-32}" --out "$OUT/sweep.jsonl")
ROUNDS=${ROUNDS:-1}
REPS=${REPS:-0}
[ "$REPS" -gt 0 ] && ROUNDS=1  # the turns are taken at each level instead
turns=()  # LABEL=PORT of the servers that take turns (REPS)
for round in $(seq 1 "$ROUNDS"); do
for n in "${NAMES[@]}"; do
  [[ " ${PROFILE_ONLY:-} " == *" $n "* ]] && continue
  if [ "${READY[$n]:-}" = "" ] || [ "${READY[$n]}" = dead ]; then stop_server "$n"; continue; fi
  if [ "$(left)" -lt 30 ]; then log "SKIP $n: only $(left)s left"; stop_server "$n"; continue; fi
  if [ "$round" = 1 ]; then
    log "== $n: greedy"
    PYTHONPATH=$SITE timeout 60 python3 "$HERE/sweep_load.py" --port "${PORT[$n]}" --label "$n" \
      --vocab "${SVOCAB[$n]}" --greedy 16 --out "$OUT/greedy.jsonl" 2>&1 | tee -a "$OUT/run.log"
  fi
  case $n in *-tiny|*-tiny+*) stop_server "$n"; continue ;; esac
  if [ "$REPS" -gt 0 ]; then turns+=("$n=${PORT[$n]}"); continue; fi
  conc=${CONC:-1,2,4,8,16,32,64,128}
  [ "$round" -gt 1 ] && conc=${CONC_REPEAT:-$conc}
  case $n in *traced*) conc=${CONC_TRACED:-$conc} ;; esac
  log "== $n: sweep $conc (round $round of $ROUNDS)"
  echo "{\"label\": \"$n\", \"phase\": \"sweep\", \"round\": $round, \"log_lines\": $(wc -l < "$LOGS/server_$n.log")}" >> "$OUT/sweep.jsonl"
  PYTHONPATH=$SITE timeout $(( $(left) - 10 )) python3 "$HERE/sweep_load.py" --port "${PORT[$n]}" \
    --label "$n" --conc "$conc" "${LOAD[@]}" --tag "${TAG:-}round$round" 2>&1 | tee -a "$OUT/run.log"
  [ "$round" = "$ROUNDS" ] && [[ " ${PROFILE:-} " != *" $n "* ]] && stop_server "$n"
done
done
if [ "${#turns[@]}" -gt 0 ]; then
  conc=${CONC:-1,2,4,8,16,32,64,128}
  log "== turns at each level of $conc, $REPS each: ${turns[*]}"
  for t in "${turns[@]}"; do
    echo "{\"label\": \"${t%=*}\", \"phase\": \"sweep\", \"reps\": $REPS, \"log_lines\": $(wc -l < "$LOGS/server_${t%=*}.log")}" >> "$OUT/sweep.jsonl"
  done
  PYTHONPATH=$SITE timeout $(( $(left) - 10 )) python3 "$HERE/sweep_load.py" \
    --targets "$(IFS=,; echo "${turns[*]}")" --reps "$REPS" --conc "$conc" "${LOAD[@]}" \
    --tag "${TAG:-}turns" 2>&1 | tee -a "$OUT/run.log"
  for t in "${turns[@]}"; do [[ " ${PROFILE:-} " != *" ${t%=*} "* ]] && stop_server "${t%=*}"; done
fi
profile_server() {  # profile_server NAME: GPU kernels of 20 decode steps at PROFILE_CONC, then
  # (PROFILE_CPU=1) 8 steps with the host side too: who launched each kernel, host time per frame
  local n=$1 port=${PORT[$1]} lp cpu=${PROFILE_CPU:-1}
  PYTHONPATH=$SITE python3 "$HERE/sweep_load.py" --port "$port" --label "$n" --vocab "$VOCAB" \
    --conc "${PROFILE_CONC:-64}" --warmup-s 1 --window-s $(( cpu == 1 ? 16 : 8 )) --windows 1 --tag profile --out "$OUT/profile.jsonl" &
  lp=$!
  sleep 3
  local acts='"GPU"'; [ "${PROFILE_RAW:-0}" = 1 ] && acts='"CPU", "GPU"'
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
for n in ${PROFILE:-}; do
  if [ "${READY[$n]:-}" = "" ] || [ "${READY[$n]}" = dead ] || [ "$(left)" -lt 40 ]; then continue; fi
  log "== $n: GPU profile at concurrency ${PROFILE_CONC:-64}"
  profile_server "$n"
  stop_server "$n"
done
if [ "${KERNELS:-0}" = 1 ] && [ "$(left)" -gt 30 ]; then
  log "== attention kernels of a one-token verify"
  PYTHONPATH=$SITE timeout $(( $(left) - 10 )) python3 "$HERE/splitkv_check.py" \
    >> "$OUT/profile.jsonl" 2>> "$OUT/run.log" || log "kernel check failed"
fi
log "== pack"
for m in "${MONITORS[@]}"; do kill "$m" 2>/dev/null; done
tar -C "$LOGS" -czf "$OUT/servers.tgz" . 2>/dev/null
[ "${PROFILE_RAW:-0}" = 1 ] && [ -d /tmp/prof ] && tar -C /tmp/prof -czf "$OUT/prof.tgz" .
ls "$CARRY"/*/events-*.jsonl >/dev/null 2>&1 && tar -czf "$OUT/traces.tgz" "$CARRY"/*/events-*.jsonl "$CARRY"/*/*.json
[ -f "$RECIPE/jitcache.tgz" ] || [ -f "$CARRY/jitcache.tgz" ] || tar -C "$JITC" -czf "$OUT/jitcache.tgz" . 2>/dev/null
log "done"
