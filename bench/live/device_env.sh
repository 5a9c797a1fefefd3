# Shared by the device-side scripts in bench/live (source it; needs T0, OUT, RECIPE set):
# the recipe's environment (../shared/live-sglang/device_run.sh), the carry unpacked to $SITE
# (the recipe's bundle, or a probe carry of prepare_probe_release.py: its base and sglang-kernel
# there, its release beside), a restored JIT cache, and helpers to start/stop servers in their
# own process groups. A probe carry's base goes to /tmp/site-probe (probe_release.sh's), never
# over the bundle's /tmp/site, which install_bundle keeps once unpacked.
if [ -f "${RECIPE:-}/base.tar.xz" ]; then SITE=${SITE:-/tmp/site-probe} JITC=${JITC:-/tmp/jitcache-probe}; fi
SITE=${SITE:-/tmp/site}
JITC=${JITC:-/tmp/jitcache}
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE_S - $(el) )); }
log() { echo "[$(el)s] $*" | tee -a "$OUT/run.log"; }

device_env() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  [ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
  [ -d /usr/local/cuda ] && export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  local nvlib
  nvlib=$(python3 -c "import os, torch; print(os.path.realpath(os.path.join(os.path.dirname(torch.__file__), '..', 'nvidia', 'cu13', 'lib')))" 2>/dev/null)
  [ -n "$nvlib" ] && [ -d "$nvlib" ] && export LD_LIBRARY_PATH="$nvlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TVM_FFI_CACHE_DIR=$JITC/tvm-ffi TRITON_CACHE_DIR=$JITC/triton
  mkdir -p "$TVM_FFI_CACHE_DIR" "$TRITON_CACHE_DIR"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
}

unpack() {  # unpack ARCHIVE DIR: a .tar.xz, with xz where the machine has it
  mkdir -p "$2"
  if command -v xz >/dev/null; then
    xz -T0 -dc "$1" | tar -C "$2" -xf -
  else
    python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"
  fi
}

restore_jit() {  # restore_jit JIT_CACHE_ARCHIVE...: those there (.tgz, or .txz where the carry
  # must be small: tar reads either), into $JITC
  local cache
  mkdir -p "$JITC"
  for cache in "$@"; do
    [ -f "$cache" ] && tar -C "$JITC" -xf "$cache" && log "restored JIT cache from $cache"
  done
  return 0
}

install_bundle() {  # install_bundle [JIT_CACHE_TGZ...]
  log "== install bundle"
  [ -f "$SITE/.ok" ] || { unpack "$RECIPE/site.tar.xz" "$SITE" && touch "$SITE/.ok"; }
  restore_jit "$@"
}

# a warm machine keeps what an earlier call unpacked from the same archives (sizes as the stamp)
stamp() { stat -c %s "$@" | tr '\n' ' '; }
fresh() { [ "$(cat "$1/.ok" 2>/dev/null)" = "$2" ]; }  # fresh DIR STAMP

install_probe() {  # install_probe FOLDER [JIT_CACHE_TGZ...]: a probe carry's base and
  # sglang-kernel -> $SITE; the JIT caches; the carried libnuma.so.1 (sglang-kernel 0.4.3's op
  # library needs it) where the system has none
  local st
  st=$(stamp "$1/base.tar.xz" "$1/kernel.tar.xz")
  if ! fresh "$SITE" "$st"; then
    rm -rf "$SITE"
    unpack "$1/base.tar.xz" "$SITE" && unpack "$1/kernel.tar.xz" "$SITE" && echo "$st" > "$SITE/.ok"
  fi
  shift
  restore_jit "$@"
  if ! ldconfig -p 2>/dev/null | grep -q 'libnuma.so.1 '; then
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$SITE/_probe_libs"
    log "no system libnuma.so.1: using the carried one ($SITE/_probe_libs)"
  fi
}

install_release() {  # install_release FOLDER VERSION SG_DIR OV_DIR: sglang VERSION of the probe
  # carry FOLDER -> SG_DIR, its overlay (wheels ahead of the base), if carried, -> OV_DIR
  local st
  st=$(stamp "$1/sglang-$2.tar.xz")
  if ! fresh "$3" "$st"; then
    rm -rf "$3"; unpack "$1/sglang-$2.tar.xz" "$3" && echo "$st" > "$3/.ok"
  fi
  rm -rf "$4"
  if [ -f "$1/overlay-$2.tar.xz" ]; then unpack "$1/overlay-$2.tar.xz" "$4" && touch "$4/.ok"; fi
  return 0
}

carry_release() {  # carry_release FOLDER: the version of the first sglang-*.tar.xz in a probe carry
  local a
  a=$(ls "$1"/sglang-*.tar.xz 2>/dev/null | head -1)
  a=${a##*/sglang-}; echo "${a%.tar.xz}"
}

carry_needs() {  # carry_needs RECIPE: the files the carry must hold (for hook_dirs_ready): the
  # bundle's site.tar.xz, or a probe carry's base, sglang-kernel and release archives
  if [ -f "$1/base.tar.xz" ]; then
    local v
    v=$(carry_release "$1")
    echo "$1/base.tar.xz" "$1/kernel.tar.xz" "$1/sglang-${v:-VERSION}.tar.xz"
  else
    echo "$1/site.tar.xz"
  fi
}

install_carry() {  # install_carry [JIT_CACHE_TGZ...]: $RECIPE's bundle, or its probe carry's base
  # and release as probe_release.sh unpacks them (sglang 0.5.13 to ${SG}013, its tvm-ffi JIT
  # cache in $JITC/tvm-ffi-013); sets SGPATH, a server's PYTHONPATH (overlay, sglang, site), and
  # PREFILL_GRAPH_OFF, the flag that turns that sglang's prefill CUDA graph off
  local ver tag sg=$SITE
  if [ -f "$RECIPE/base.tar.xz" ]; then
    ver=$(carry_release "$RECIPE"); tag=${ver##*.}
    while [ ${#tag} -lt 3 ]; do tag=0$tag; done
    sg=${SG:-/tmp/sg}$tag
    log "== install probe carry $RECIPE: base + sglang-kernel -> $SITE, sglang $ver -> $sg"
    install_probe "$RECIPE" "$RECIPE/jitcache.tgz" "$@"
    install_release "$RECIPE" "$ver" "$sg" "${OV:-/tmp/ov}$tag"
    SGPATH="$sg:$SITE"
    [ -f "${OV:-/tmp/ov}$tag/.ok" ] && SGPATH="${OV:-/tmp/ov}$tag:$SGPATH"
    export TVM_FFI_CACHE_DIR=$JITC/tvm-ffi-$tag
  else
    install_bundle "$RECIPE/jitcache.tgz" "$@"
    SGPATH=$SITE
  fi
  PREFILL_GRAPH_OFF=$(prefill_graph_off "$sg")
  log "installed: $(cd "$sg" && ls -d sglang-*.dist-info 2>/dev/null), prefill CUDA graph off:" \
      "${PREFILL_GRAPH_OFF:-no flag}"
}

prefill_graph_off() {  # prefill_graph_off SITE: the flag that turns the prefill CUDA graph off
  # for the sglang in SITE: --disable-prefill-cuda-graph from 0.5.14 on, --disable-piecewise-
  # cuda-graph on 0.5.10-0.5.13 (0.5.14-0.5.16 keep it as an alias), none on 0.5.9 (opt-in there)
  local args=("$1/sglang/srt/server_args.py" "$1/sglang/srt/arg_groups")
  if grep -rqs disable_prefill_cuda_graph "${args[@]}"; then
    echo --disable-prefill-cuda-graph
  elif grep -rqs -- '"--disable-piecewise-cuda-graph"' "${args[@]}"; then
    echo --disable-piecewise-cuda-graph
  fi
  return 0
}

hook_dirs_ready() {  # hook_dirs_ready HOOKS NEEDED...: 0 if each needed path exists (else
  # logs what is missing); then every hook directory gets the payload where --share-payload
  # (prepare_hook_check.py) kept it in the first only, to fit the carry
  local hooks=$1 need full d
  shift
  for need in "$@"; do
    [ -e "$need" ] || { log "MISSING $need: see the head of this script"; return 1; }
  done
  full=$(dirname "$(ls -d "$hooks"/*/sgtrace_payload 2>/dev/null | head -1)")
  for d in "$hooks"/*/; do
    [ -d "$d/sgtrace_payload" ] || cp -r "$full/sgtrace_payload" "$full/sitecustomize.py" "$d"
  done
}

gpu_local_cpus() {  # the CPUs of GPU 0's NUMA node (a taskset list), from sysfs; empty if unknown
  local bus sys=${SYSFS:-/sys}
  bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | tr 'A-F' 'a-f')
  bus=${bus: -12}  # 00000000:19:00.0 -> 0000:19:00.0, sysfs's form
  [ -n "$bus" ] && cat "$sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null
}

declare -A PID READY CPUS
start_server() {  # start_server NAME LOGFILE PYTHONPATH [VAR=VALUE...] -- ARGS...: own process group
  # (on the CPUs CPUS[NAME] names, a taskset list, where set)
  local name=$1 logf=$2 pypath=$3 pidf=/tmp/server-$1.pid envs=() pin=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -f "$pidf"
  [ -n "${CPUS[$name]:-}" ] && command -v taskset >/dev/null && pin=(taskset -c "${CPUS[$name]}")
  PYTHONPATH=$pypath setsid bash -c 'echo $$ > "$0"; exec "$@"' "$pidf" \
    "${pin[@]}" env "${envs[@]}" python3 -m sglang.launch_server "$@" > "$logf" 2>&1 &
  for _ in $(seq 1 50); do [ -s "$pidf" ] && break; sleep 0.1; done
  PID[$name]=$(cat "$pidf" 2>/dev/null)
}

stop_server() {  # stop_server NAME: end exactly that server's process group
  local pid=${PID[$1]:-}
  [ -n "$pid" ] || return 0
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$pid" 2>/dev/null
  PID[$1]=""
}

freeze_gc() {  # freeze_gc NAME PORT: SGLang's /freeze_gc on that server (its front's and its
  # scheduler's objects then are never scanned by a collection again); said in run.log
  local said
  said=$(timeout 30 python3 -c 'import sys, urllib.request as u
r = u.urlopen(u.Request(f"http://127.0.0.1:{sys.argv[1]}/freeze_gc", method="POST"), timeout=25)
print(r.status, r.read().decode().strip())' "$2" 2>&1 | tail -1)
  log "$1: collector frozen: ${said:-no answer}"
}

wait_ready() {  # wait_ready TIMEOUT_S LOGDIR NAME...: READY[NAME] = seconds or "dead"
  local timeout=$1 logdir=$2 n pending
  shift 2
  while true; do
    pending=0
    for n in "$@"; do
      [ -n "${READY[$n]:-}" ] && continue
      if grep -q "ready to roll" "$logdir/server_$n.log" 2>/dev/null; then
        READY[$n]=$(el); log "server $n READY after ${READY[$n]}s"
      elif [ -n "${PID[$n]:-}" ] && ! kill -0 "${PID[$n]}" 2>/dev/null; then
        READY[$n]=dead; log "server $n DIED"
        tail -40 "$logdir/server_$n.log" | sed "s/^/  [$n] /" >> "$OUT/run.log"
      else
        pending=1
      fi
    done
    [ $pending = 0 ] && return 0
    if [ "$(el)" -gt "$timeout" ]; then log "ready timeout: going on with the ready ones"; return 0; fi
    sleep 1
  done
}
