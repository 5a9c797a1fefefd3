#!/usr/bin/env bash
# Live probe of an SGLang release WITHOUT upstream's zero-step state on the lent H200, ONE device
# call: does SGLang 0.5.13 (and 0.5.12) start on the 0.5.16 bundle's stack, plain and EAGLE-3,
# where does it stop if not (exact error), greedy outputs, tokens/s at concurrency 1 and 8, and
# the EAGLE-3 server with sgtrace's runtime hook directory (it switches through SGLang's plain
# decode path: every toggle applied, switch lines logged, no fault).
#
# Before (on your machine, from the repo root):  python bench/live/prepare_probe_release.py
#   writes .carry/probe013 (base stack, sglang-kernel 0.4.3, sglang 0.5.13, hook013, recipe
#   scripts) and .carry/probe012 (sglang 0.5.12, hook012; optional). It prints the call's size.
# Device call, from the repo root, carry [".carry/probe013", ".carry/probe012"], timeout_s 600:
#   bash bench/live/probe_release.sh
# Dry run here (no GPU: checks the carry, unpacks it, prints the server command lines):
#   DRY=1 bash bench/live/probe_release.sh
#
# Servers (own process group each, --sleep-on-idle; all started together, then measured one at
# a time): base013 eagle013 hook013 base012 eagle012 hook012 (the 012 ones only if .carry/probe012 is
# there). Knobs (env): SERVERS, DEADLINE_S (540), READY_TIMEOUT_S (330), RETRY_NOGRAPH (1: a
# server that died at start is started once more with --disable-cuda-graph if time is left),
# LOAD_CONC / LOAD_REQS (every server's load levels and requests per level).
#
# The plain off state (`prepare_probe_release.py --plain`): SERVERS=plain runs base<tag> and every
# plain_*<tag> hook directory of each carried release (plain_off013 plain_k2_013 plain_k7_013:
# EAGLE-3 with the hook, held off or toggled every K decode results). Each
# server, in turn: greedy serial + burst (greedy_check.py), load at 1,8,32,64 concurrent requests
# (8,32,96,128 requests; base too, for comparison); before each phase and after the last, a mark
# (log lines so far, process alive) that lets the report count toggles and switches per phase and
# see a crash or SGLang's idle memory self-check ("memory leak detected" raises on a KV leak).
# SGLang 0.5.9 (`prepare_probe_release.py --releases 0.5.9 --plain`: .carry/probe009 alone, with
# the bundle's sglang-kernel 0.4.5 and flashinfer 0.6.3 ahead): tag 009 is 0.5.9 on its pinned
# flashinfer, tag t09 the same tree on the bundle's 0.6.14 with sglang09_shim's PyTorch rope; e.g.
#   SERVERS="base009 eagle009 plain_off009 plain_k2_009 eaglet09 plain_k2_t09" bash bench/live/probe_release.sh
# Comes back in $OUT (<= 8 files): run.log results.jsonl greedy.jsonl probe_release.json
# probe_release.md servers.tgz (server + import logs) jitcache.tgz
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/probe-release-out}
T0=$(date +%s)
DEADLINE_S=${DEADLINE_S:-540}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-330}
RETRY_NOGRAPH=${RETRY_NOGRAPH:-1}
DRY=${DRY:-0}
HERE=bench/live
# the folder with the base stack: PROBE, else the first of probe013, probe009 carried
P=${PROBE:-}
if [ -z "$P" ]; then
  for P in .carry/probe013 .carry/probe009; do [ -f "$P/base.tar.xz" ] && break; done
  [ -f "$P/base.tar.xz" ] || P=.carry/probe013
fi
# where things go on the device (env overrides for tests): the base, each release ($SG<tag>) and
# its overlay ($OV<tag>), the JIT caches, the tiny models, the server logs
SITE=${SITE:-/tmp/site-probe}
SG=${SG:-/tmp/sg}
OV=${OV:-/tmp/ov}
JITC=${JITC:-/tmp/jitcache-probe}
TINY=${TINY:-/tmp/tiny-probe}
LOGS=${LOGS:-/tmp/probe-release-logs}
mkdir -p "$OUT" "$LOGS"
. "$HERE/device_env.sh"

# releases carried: tag -> version and folder (0.5.13 in probe013; 0.5.12 in probe012, optional;
# 0.5.9 in probe009). A tag is a release on one stack: 009 is 0.5.9 with flashinfer 0.6.3 (its
# pin) ahead of the base, t09 the same 0.5.9 tree (SRC) on the bundle's flashinfer 0.6.14 with
# the shim's PyTorch rope instead of 0.5.9's JIT one; both get bench/live/sglang09_shim (SHIM)
# and XENV (0.5.9's sgl-kernel pin check off; SGLANG_ENABLE_SPEC_V2=1: EAGLEWorkerV2 with the
# overlap scheduler, where the plain off state's hook attaches).
declare -A VER=([013]=0.5.13 [012]=0.5.12 [009]=0.5.9 [t09]=0.5.9)
declare -A DIR=([013]=.carry/probe013 [012]=.carry/probe012 [009]=.carry/probe009 [t09]=.carry/probe009)
declare -A SRC=([t09]=009) NO_OVERLAY=([t09]=1) SHIM=([009]=$HERE/sglang09_shim [t09]=$HERE/sglang09_shim)
V09="SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1 SGLANG_ENABLE_SPEC_V2=1"
declare -A XENV=([009]="$V09" [t09]="$V09 SGTRACE_PROBE_ROPE=torch")
src() { echo "${SRC[$1]:-$1}"; }  # the tag whose unpacked tree (and hook directories) TAG uses
TAGS=()
for t in 013 012 009 t09; do  # carried: its archive is there, beside this base or in a folder without one
  [ -f "${DIR[$t]}/sglang-${VER[$t]}.tar.xz" ] || continue
  [ "${DIR[$t]}" = "$P" ] || [ ! -f "${DIR[$t]}/base.tar.xz" ] && TAGS+=("$t")
done
for need in "$P/base.tar.xz" "$P/kernel.tar.xz" "$P/load.py" "$P/make_tiny_models.py" \
            "$HERE/greedy_check.py" "$HERE/probe_release_report.py" "$HERE/probe_plain_report.py"; do
  [ -e "$need" ] || { log "MISSING $need: run bench/live/prepare_probe_release.py, carry $P"; exit 2; }
done
[ ${#TAGS[@]} -gt 0 ] || { log "MISSING a release archive (sglang-*.tar.xz) in $P"; exit 2; }
DEFAULT_SERVERS=""
for t in "${TAGS[@]}"; do
  [ "$t" = 012 ] && continue
  DEFAULT_SERVERS="$DEFAULT_SERVERS base$t eagle$t"
  [ -f "${DIR[$t]}/hook$(src "$t")/sgtrace_hook.json" ] && DEFAULT_SERVERS="$DEFAULT_SERVERS hook$t"
done
if [[ " ${TAGS[*]} " == *" 012 "* ]]; then
  DEFAULT_SERVERS="$DEFAULT_SERVERS base012 eagle012"
  [ -f "${DIR[012]}/hook012/sgtrace_hook.json" ] && DEFAULT_SERVERS="$DEFAULT_SERVERS hook012"
fi
plain_servers() {  # base<tag> and the plain hook directories of each carried release, off first
  local t found
  for t in "${TAGS[@]}"; do
    [ -n "${SRC[$t]:-}" ] && continue  # a variant: name its servers in SERVERS
    found=$(cd "${DIR[$t]}" && { ls -d plain_off*"$t" 2>/dev/null; ls -d plain_*"$t" 2>/dev/null | grep -v '^plain_off' | sort -V; })
    [ -n "$found" ] && echo "base$t" $found
  done
}
if [ "${SERVERS:-}" = plain ]; then
  SERVERS=$(plain_servers)
  [ -n "$SERVERS" ] || { log "no plain_* hook directory in $P: run bench/live/prepare_probe_release.py --plain --hooks-only"; exit 2; }
fi
NAMES=(${SERVERS:-$DEFAULT_SERVERS})
log "== probe_release: releases ${TAGS[*]}, servers ${NAMES[*]}, deadline ${DEADLINE_S}s"
log "carried: $(du -sm "$P" $([ "$P" = .carry/probe013 ] && echo "${DIR[012]}") 2>/dev/null | awk '{printf "%s %s MiB; ", $2, $1}')"

[ "$DRY" = 1 ] || device_env
export TVM_FFI_CACHE_DIR=$JITC/tvm-ffi TRITON_CACHE_DIR=$JITC/triton
mkdir -p "$JITC"
log "== install: base + sglang-kernel -> $SITE, each release -> $SG<tag>"
install_probe "$P" "$P/jitcache.tgz"
for t in "${TAGS[@]}"; do
  [ -n "${SRC[$t]:-}" ] && continue  # shares its source tag's tree
  install_release "${DIR[$t]}" "${VER[$t]}" "$SG$t" "$OV$t"
done
log "installed: $(du -sm "$SITE" | cut -f1) MB base, dists: $(cd "$SITE" && ls -d sglang_kernel-* flashinfer_python-* transformers-* apache_tvm_ffi-* 2>/dev/null | tr '\n' ' ')"
for t in "${TAGS[@]}"; do log "  sglang $t: $(ls -d $SG$(src "$t")/sglang-*.dist-info 2>/dev/null | xargs -n1 basename)"; done

pypath() {  # pypath TAG [HOOK_DIR]: PYTHONPATH of a server of that release (hook, shim, overlay, release, base)
  local s p
  s=$(src "$1"); p="$SG$s:$SITE"
  [ -d "$OV$s" ] && [ -z "${NO_OVERLAY[$1]:-}" ] && p="$OV$s:$p"
  [ -n "${SHIM[$1]:-}" ] && p="$PWD/${SHIM[$1]}:$p"
  [ -n "${2:-}" ] && p="$PWD/$2:$p"
  echo "$p"
}

COMMON=(--attention-backend triton --host 127.0.0.1
        --mem-fraction-static 0.5 --max-running-requests 64 --cuda-graph-max-bs 64
        --sampling-backend pytorch --grammar-backend none
        --max-total-tokens 262144 --log-level info --sleep-on-idle)
SPEC=(--speculative-algorithm EAGLE3 --speculative-draft-model-path "$TINY/draft"
      --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4)
declare -A PORT KIND TAGOF STARTED HOOKDIR
port=31000
for n in "${NAMES[@]}" ; do
  case $n in
    base*) KIND[$n]=base ;; eagle*) KIND[$n]=eagle ;; hook*) KIND[$n]=hook ;; plain_*) KIND[$n]=plain ;;
    *) log "unknown server $n (base<tag>, eagle<tag>, hook<tag>, plain_*<tag>)"; exit 2 ;;
  esac
  TAGOF[$n]=${n: -3}
  [[ " ${TAGS[*]} " == *" ${TAGOF[$n]} "* ]] && [ -f "$SG$(src "${TAGOF[$n]}")/.ok" ] || { log "release of $n not carried"; exit 2; }
  # the directory is named after the server (a variant's: after its source tag's server)
  case ${KIND[$n]} in hook|plain) HOOKDIR[$n]=${DIR[${TAGOF[$n]}]}/${n%"${TAGOF[$n]}"}$(src "${TAGOF[$n]}") ;; esac
  [ -z "${HOOKDIR[$n]:-}" ] || [ -f "${HOOKDIR[$n]}/sgtrace_hook.json" ] \
    || { log "no hook directory ${HOOKDIR[$n]}: run bench/live/prepare_probe_release.py --hooks-only$([ "${KIND[$n]}" = plain ] && echo ' --plain')"; exit 2; }
  PORT[$n]=$port; port=$((port + 100))
done
HAS_PLAIN=0
for n in "${NAMES[@]}"; do [ "${KIND[$n]}" = plain ] && HAS_PLAIN=1; done
server_args() {  # server_args NAME [extra...]: the launch_server arguments
  local n=$1; shift
  local a=(--model-path "$TINY/target" "${COMMON[@]}" --port "${PORT[$n]}")
  [ "${KIND[$n]}" != base ] && a+=("${SPEC[@]}")
  echo "${a[@]}" "$@"
}
launch() {  # launch NAME [extra args...]
  local n=$1 t=${TAGOF[$1]}; shift
  # shellcheck disable=SC2046
  start_server "$n" "$LOGS/server_$n.log" "$(pypath "$t" "${HOOKDIR[$n]:-}")" \
    "TVM_FFI_CACHE_DIR=$JITC/tvm-ffi-$t" ${XENV[$t]:-} -- $(server_args "$n" "$@")
  STARTED[$n]=$(el)
  log "started $n (sglang ${VER[$t]}, port ${PORT[$n]}, pid ${PID[$n]:-none})"
}

if [ "$DRY" = 1 ]; then
  for n in "${NAMES[@]}"; do
    echo "PYTHONPATH=$(pypath "${TAGOF[$n]}" "${HOOKDIR[$n]:-}") ${XENV[${TAGOF[$n]}]:-} python3 -m sglang.launch_server $(server_args "$n")" | tee -a "$OUT/run.log"
  done
  for t in "${TAGS[@]}"; do
    log "dry: sglang $t version file: $(grep -h version $SG$(src "$t")/sglang/version.py $SG$(src "$t")/sglang/_version.py 2>/dev/null | head -2 | tr '\n' ' ')"
  done
  log "dry: sgl_kernel $(sed -n 's/^__version__ = //p' "$SITE/sgl_kernel/version.py")," \
      "common_ops: $(ls "$SITE"/sgl_kernel/sm90/), libnuma: $(ls "$SITE"/_probe_libs 2>/dev/null)"
  python3 "$HERE/probe_release_report.py" --out "$OUT" --logs "$LOGS" --names "${NAMES[@]}" 2>&1 | tail -3
  log "== dry run done"; exit 0
fi

cleanup() { for n in "${!PID[@]}"; do stop_server "$n"; done; }
trap cleanup EXIT

log "== env"
{
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, torch.version.cuda, 'triton', triton.__version__)"
  ldconfig -p | grep -E "libnuma.so.1 " || echo "no system libnuma.so.1"
  nproc; free -g | head -2
} >> "$OUT/run.log" 2>&1

log "== tiny models"
PYTHONPATH=$SITE python3 "$P/make_tiny_models.py" "$TINY" --corpus-dir "$SG$(src "${TAGS[0]}")/sglang/srt/managers" >> "$OUT/run.log" 2>&1 \
  || { log "tiny models FAILED"; tail -20 "$OUT/run.log"; }
echo '{"bos_token_id": 1, "eos_token_id": 2, "do_sample": false}' > "$TINY/target/generation_config.json"

log "== start ${NAMES[*]}"
for n in "${NAMES[@]}"; do launch "$n"; done

# meanwhile: an import probe per release (versions, the modules a server needs), at low priority
IMPORT_PIDS=()
for t in $(for n in "${NAMES[@]}"; do echo "${TAGOF[$n]}"; done | sort -u); do
  # shellcheck disable=SC2086
  PYTHONPATH=$(pypath "$t") env TVM_FFI_CACHE_DIR=$JITC/tvm-ffi-$t ${XENV[$t]:-} nice -n 10 timeout 150 python3 - > "$LOGS/imports_$t.log" 2>&1 <<'EOF' &
import importlib, importlib.metadata as md, time
for d in ["sglang", "sglang-kernel", "flashinfer-python", "apache-tvm-ffi", "sgl-deep-gemm",
          "transformers", "tokenizers", "xgrammar", "torch", "triton"]:
    try:
        print("DIST", d, md.version(d))
    except Exception as e:
        print("DIST", d, "MISSING", type(e).__name__)
for m in ["sgl_kernel", "flashinfer", "tvm_ffi", "deep_gemm", "transformers", "xgrammar",
          "sglang.srt.server_args", "sglang.srt.entrypoints.http_server",
          "sglang.srt.managers.scheduler", "sglang.srt.speculative.eagle_worker_v2",
          "sglang.srt.models.llama", "sglang.srt.models.llama_eagle3",
          "sglang.srt.layers.attention.triton_backend", "sglang.srt.layers.rotary_embedding"]:
    t = time.time()
    try:
        mod = importlib.import_module(m)
        print("IMPORT OK  ", m, getattr(mod, "__file__", ""), f"{time.time()-t:.1f}s")
    except BaseException as e:
        print("IMPORT FAIL", m, type(e).__name__, str(e)[:800])
EOF
  IMPORT_PIDS+=($!)
done

ready_record() {  # ready_record NAME EXTRA_JSON: start and ready (or dead/timeout) times, since T0
  local n=$1 r=${READY[$1]}
  [[ "$r" =~ ^[0-9]+$ ]] || r="\"$r\""
  echo "{\"label\": \"$n\", \"release\": \"${VER[${TAGOF[$n]}]}\", \"kind\": \"${KIND[$n]}\", \"started_at_s\": ${STARTED[$n]:-null}, \"ready_at_s\": $r, $2}" >> "$OUT/results.jsonl"
}
wait_ready "$READY_TIMEOUT_S" "$LOGS" "${NAMES[@]}"
for n in "${NAMES[@]}"; do
  [ "${READY[$n]:-}" = "" ] && { READY[$n]=timeout; log "server $n NOT READY in ${READY_TIMEOUT_S}s"; }
  ready_record "$n" "\"started_together\": ${#NAMES[@]}"
done
wait "${IMPORT_PIDS[@]}"  # the import probes only (the servers are jobs of this shell too)
for t in "${TAGS[@]}"; do [ -f "$LOGS/imports_$t.log" ] && grep -E "^(DIST|IMPORT)" "$LOGS/imports_$t.log" | sed "s/^/  [imports $t] /" >> "$OUT/run.log"; done
grep -h "sgtrace-hook\|sgtrace:" "$LOGS"/server_hook*.log "$LOGS"/server_plain_*.log 2>/dev/null | head -20 | sed 's/^/  /' >> "$OUT/run.log"

alive() { [ -n "${PID[$1]:-}" ] && kill -0 "${PID[$1]}" 2>/dev/null; }
mark() {  # mark NAME PHASE: log lines so far and whether the server lives, as PHASE starts
  local a=false; alive "$1" && a=true
  echo "{\"label\": \"$1\", \"phase\": \"$2\", \"log_lines\": $(wc -l < "$LOGS/server_$1.log"), \"alive\": $a}" >> "$OUT/results.jsonl"
  [ $a = true ] || log "server $1 NOT ALIVE as $2 starts"
  [ $a = true ]
}
clamp() { local v=$1; [ "$v" -lt "$2" ] && v=$2; [ "$v" -gt "$3" ] && v=$3; echo "$v"; }
measure() {  # measure NAME SERVERS_LEFT: greedy outputs (serial, burst), load, stop
  local n=$1 conc=1,8 reqs=8,32 share gt lt nl
  [ "${KIND[$n]}" = hook ] && conc=1,8,32 && reqs=8,32,64
  if [ "${KIND[$n]}" = plain ] || { [ "${KIND[$n]}" = base ] && [ $HAS_PLAIN = 1 ]; }; then
    conc=1,8,32,64; reqs=8,32,96,128  # plain_k2 toggled ~800 times on 0.5.16 with these
  fi
  conc=${LOAD_CONC:-$conc}; reqs=${LOAD_REQS:-$reqs}; nl=$(echo "$conc" | tr ',' '\n' | wc -l)
  share=$(( ($(left) - 25) / $2 ))  # this server's part of the time left
  gt=$(clamp $(( share / 4 )) 30 60)  # a greedy request's timeout
  for pass in serial burst; do
    mark "$n" "$pass" || break
    log "== $n: greedy outputs, $pass (timeout ${gt}s a request)"
    timeout $(( 2 * gt + 10 )) python3 "$HERE/greedy_check.py" --port "${PORT[$n]}" --label "$n" \
      --pass "$pass" --timeout-s "$gt" --out "$OUT/greedy.jsonl" 2>&1 | tee -a "$OUT/run.log"
    sleep 1  # idle: SGLang runs its idle memory self-check
  done
  lt=$(clamp $(( (share - 20) / (nl + 1) )) 10 20)  # a load level's
  if mark "$n" load; then
    log "== $n: load at concurrency $conc, requests $reqs (level timeout ${lt}s)"
    PYTHONPATH=$SITE timeout $(( nl * lt + 45 )) python3 "$P/load.py" --port "${PORT[$n]}" \
      --label "$n" --conc "$conc" --requests "$reqs" --max-new 64 --level-timeout "$lt" \
      --out "$OUT/results.jsonl" 2>&1 | tee -a "$OUT/run.log"
    sleep 2
  fi
  mark "$n" end
  [ -n "${HOOKDIR[$n]:-}" ] && log "$n: $(grep -c 'sgtrace-hook toggle' "$LOGS/server_$n.log") toggles," \
    "$(grep -c 'sgtrace-hook switched' "$LOGS/server_$n.log") switches," \
    "$(grep -c 'memory leak detected' "$LOGS/server_$n.log") leak lines, $(grep -c Traceback "$LOGS/server_$n.log") tracebacks"
  stop_server "$n"
}

i=0
for n in "${NAMES[@]}"; do
  i=$((i + 1))
  case ${READY[$n]} in dead|timeout) stop_server "$n"; continue ;; esac
  if [ "$(left)" -lt 45 ]; then log "SKIP $n: only $(left)s left"; stop_server "$n"; continue; fi
  measure "$n" $(( ${#NAMES[@]} - i + 1 ))
done

# one more start without CUDA graphs for servers that died (tells graph capture from the rest)
if [ "$RETRY_NOGRAPH" = 1 ]; then
  RETRY=()
  for n in "${NAMES[@]}"; do [ "${READY[$n]}" = dead ] && RETRY+=("$n"); done
  if [ ${#RETRY[@]} -gt 0 ] && [ "$(left)" -gt 150 ]; then
    log "== retry without CUDA graphs: ${RETRY[*]}"
    R2=()
    for n in "${RETRY[@]}"; do
      r=${n}_nograph; KIND[$r]=${KIND[$n]}; TAGOF[$r]=${TAGOF[$n]}; PORT[$r]=$(( PORT[$n] + 50 ))
      HOOKDIR[$r]=${HOOKDIR[$n]:-}
      launch "$r" --disable-cuda-graph; R2+=("$r")
    done
    wait_ready $(( $(el) + $(left) - 70 )) "$LOGS" "${R2[@]}"
    for r in "${R2[@]}"; do
      [ "${READY[$r]:-}" = "" ] && READY[$r]=timeout
      ready_record "$r" "\"retry_of\": \"${r%_nograph}\""
      case ${READY[$r]} in dead|timeout) stop_server "$r"; continue ;; esac
      if [ "$(left)" -lt 40 ]; then stop_server "$r"; continue; fi
      measure "$r" 1
    done
    NAMES+=("${R2[@]}")
  elif [ ${#RETRY[@]} -gt 0 ]; then
    log "no time left to retry ${RETRY[*]} without CUDA graphs"
  fi
fi
cleanup

log "== report"
python3 "$HERE/probe_release_report.py" --out "$OUT" --logs "$LOGS" --names "${NAMES[@]}" 2>&1 | tee -a "$OUT/run.log"
tar -C "$LOGS" -czf "$OUT/servers.tgz" .
(cd "$JITC" && find . -path "./tvm-ffi*" -name "*.so" > "$JITC.list" && find triton -type f >> "$JITC.list" \
  && tar -czf "$OUT/jitcache.tgz" -T "$JITC.list")
if [ "$(stat -c %s "$OUT/jitcache.tgz" 2>/dev/null || echo 0)" -gt $((15*1024*1024)) ]; then
  (cd "$JITC" && find . -path "./tvm-ffi*" -name "*.so" | tar -czf "$OUT/jitcache.tgz" -T -)
fi
log "== done"
