#!/usr/bin/env bash
# The whole GPU check in one command: environment, GPU tests, memory/race/sync checks of every
# native level, the benchmark tables, the size curves, the host overhead and the microbenchmarks.
# Logs and JSON go to $OUT (default ./out); a short summary last.
#   bash tools/gpu_run.sh [steps...]
#   steps: env tests tests1 … tests6 sanitize sgemm hgemm curve shapes overhead micro
#          sweep ncu profile notebook top warm firstcall gemv residency plans skinny tiles
#          (default: env warm tests sanitize sgemm hgemm overhead micro)
#   warm: python -m numba_gemm warm --census, every level's kernels (or those of WARM_LEVELS, a
#   comma list: the tiles step needs only v11,v11sk,v11sl,v11t,v12,v13) compiled and its SASS
#   census taken into NUMBA_GEMM_CACHE_DIR
#   (default .cache/numba_gemm in the checkout, so a carried .cache skips it on the next call);
#   firstcall: tools/first_call.py, cold and cached first calls (FIRSTCALL_LEVELS, default all)
#   gemv: v11gv (and v11gv:splits=4, the plan docs/data/v11gv_four_slices.patch would ship) beside
#   v11t, v11sk and v11sl at M <= 2 in ${GEMV_DTYPES:-fp16 bf16}, one JSON each (GEMV_LEVELS,
#   GEMV_SHAPES: space-separated M,N,K)
#   residency: tools/cluster_residency.py, whether the cluster levels' planned CTAs (RESIDENCY_LEVELS,
#   default v11sl,v11t,v11gv, at the suite's shapes or RESIDENCY_SHAPES: space-separated M,N,K)
#   fit on the GPU at once, JSON out
#   plans: v11t, v11sl and v11gv (PLANS_LEVELS) as they plan, beside LEVEL:splits=S, the split the
#   SMs alone would size (before the plans counted the clusters that fit), at PLANS_SHAPES
#   (space-separated M,N,K) in ${PLANS_DTYPES:-fp16 bf16}, one bench.py JSON per shape and dtype
#   skinny: v11t, v11sl and v11sk at M <= 64 in ${SKINNY_DTYPES:-fp16 bf16}, one JSON each
#   (SKINNY_LEVELS, a comma list that may pass run() arguments as v11t:nt=128; SKINNY_SHAPES:
#   space-separated M,N,K)
#   tiles: v11, v11sk, v11sl, v11t, v12 and v13 with every tile of their TILE_CHOICES (TILE_LEVELS)
#   timed together at the suite's shapes with M > 2 and rows TMA takes (TILE_SHAPES, plus
#   TILE_MORE: space-separated M,N,K) in ${TILE_DTYPES:-fp16}: what a refit of auto needs where
#   tiles and levels compete (tools/calibrate_auto.py), one JSON per dtype; four shapes per
#   process, each cut at TILE_TIMEOUT (150) s; with TILE_BUDGET (seconds for the step) no group
#   starts that could end past it, and the step prints the shapes left as a TILE_SHAPES= line
#   for the next call
#   top: the Hopper rungs (TOP_LEVELS, default v11,v12,v13; LEVEL:name=value passes run() arguments)
#   exact on ragged shapes (TOP_SHAPES), then timed against each other and cuBLAS in interleaved
#   rounds (tools/hopper_top.py, TOP_SIZES; TOP_ARGS: more of its options), JSON out
#   shapes: the shape suite (bench.py --suite shapes) in ${SHAPES_DTYPES:-fp32 fp16 bf16}, one JSON
#   each (SHAPES_ONLY: comma-separated shape names, bench.py --only); a copy of the checkout without .git records its commit from NUMBA_GEMM_COMMIT (set it
#   from the machine that sends the run: NUMBA_GEMM_COMMIT=$(git rev-parse --short HEAD)).
#   The GPU test suite is longer than one 10-minute call, so it runs in chunks of at most ~6
#   minutes, grouped by what is slow on a GPU (each chunk's pytest summary line is printed):
#     tests1  the Numba SGEMM levels: hypothesis shapes on every level, 2^31 indexing, the twins
#             (56 s after the warm step)
#     tests2  the HGEMM levels: every native level and v8py on ragged shapes in fp16 and bf16
#             (186 s)
#     tests3  v11's other tiles, the wgmma levels past 2^31 elements, TMA descriptors, NVRTC
#             compiles, v11gv (169 s), v11t
#     tests4  the SASS census (compiles every level), k7/k8, intrinsics, microbenchmarks (35 s)
#     tests5  the split-K, ragged and Python-written rungs (k5sk/k8sk, v11sk, v11sl, v11p, v11r,
#             v11py) and the on-disk kernel cache in fresh processes (246 s)
#     tests6  everything else (api hypothesis shapes, operands, call cache, bench, ledgers,
#             figures, notebook): every tests/test_*.py not named above, so none is left out (146 s)
#     (pytest's seconds on the H200 after the warm step; docs/data/h200_gpu_suite.json)
#   `tests` runs chunk ${TEST_CHUNK:-1} and says which to run next, or the files in TEST_FILES.
#   LEVELS / SIZES (or SGEMM_SHAPES: space-separated M,N,K) narrow the sgemm step, HGEMM_LEVELS /
#   HGEMM_SHAPES (space-separated M,N,K; default the squares 4096 and 8192) the hgemm step, SANITIZE_LEVELS (default:
#   every native level) the sanitize step, HGEMM_DTYPES (default: fp16 bf16) the hgemm step,
#   OVERHEAD_LEVELS (default: every level) the overhead step, PYTEST_ARGS / TEST_TIMEOUT (per chunk) the tests steps,
#   SANITIZE_TOOLS / SANITIZE_SHAPE (M,N,K; default 127,200,72) the sanitize step, CURVE_LEVELS the curve, PROFILE_LEVELS / PROFILE_SIZE (or
#   PROFILE_SHAPE=M,N,K) / PROFILE_DTYPE the profile step (ncu sections of one launch per level,
#   its DRAM and L2 bytes, the SMs' L2 read sectors and hits, and the sectors that crossed between
#   the L2's two partitions (ltcfabric), cuBLAS beside them; PROFILE_SKIP / PROFILE_COUNT launches skipped and profiled, default 1 and
#   1: a level of two launches, such as a split with its reduce, takes PROFILE_SKIP=2 PROFILE_COUNT=2).
# BUDGET=S: the run ends within about S seconds. Steps run in this script's order; each starts
#   only while the least time it takes (least_s) is left, each timeout is cut to what is left, a
#   shape suite's dtype starts only with 100 s left, the tiles step's TILE_BUDGET defaults to the
#   rest, and the last line names the steps that did not start.
# KERNEL_CACHE=FILE: a kernel_cache.tar.gz an earlier run packed (PACK_CACHE), unpacked into
#   NUMBA_GEMM_CACHE_DIR's folder when that does not exist yet (carry it beside the wheels).
# PACK_LOGS=1 packs the logs into $OUT/logs.tar.gz at the end (the JSON stay beside it).
# PACK_CACHE=1 packs NUMBA_GEMM_CACHE_DIR into $OUT/kernel_cache.tar.gz at the end: unpacked into
#   the next run (KERNEL_CACHE=kernel_cache.tar.gz, or tar xzf kernel_cache.tar.gz -C .cache), a fresh
#   machine of the same toolkit skips the warm step's compiles (the cache keys name the versions).
# Wheels in .whl/ (e.g. a NumPy < 2.5 for the machine's Python) are installed first if present.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
steps=${*:-"env warm tests sanitize sgemm hgemm overhead micro"}
export NUMBA_GEMM_CACHE_DIR=${NUMBA_GEMM_CACHE_DIR:-$PWD/.cache/numba_gemm}
has() { [[ " $steps " == *" $1 "* ]]; }
skipped=()
least_s() {  # the least time a step takes on a warm kernel cache, in seconds (what BUDGET checks)
  case $1 in warm|firstcall|tiles|tests*) echo 200 ;; shapes|sgemm|hgemm|curve|overhead|top) echo 150 ;; *) echo 60 ;; esac
}
runs() {  # runs STEP: STEP was asked for and, under BUDGET, the time it needs is left
  has "$1" || return 1
  if [[ -n ${BUDGET:-} ]] && (( BUDGET - SECONDS < $(least_s "$1") )); then skipped+=("$1"); return 1; fi
}
cap() {  # cap SECONDS: a timeout cut to what BUDGET leaves (10 s kept for the steps' ends)
  local t=$1
  if [[ -n ${BUDGET:-} ]] && (( BUDGET - SECONDS - 10 < t )); then t=$(( BUDGET - SECONDS - 10 )); fi
  echo $(( t > 1 ? t : 1 ))
}
if [[ -n ${KERNEL_CACHE:-} && ! -d $NUMBA_GEMM_CACHE_DIR ]]; then   # a cache an earlier run packed
  mkdir -p "$(dirname "$NUMBA_GEMM_CACHE_DIR")"
  tar xzf "$KERNEL_CACHE" -C "$(dirname "$NUMBA_GEMM_CACHE_DIR")" && echo "kernel cache: unpacked $KERNEL_CACHE"
fi

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 \
  || echo "editable install failed (see install.log)"

shape_args() {  # the M,N,K words given, as bench.py arguments in the array shape_argv
  shape_argv=(); for s in "$@"; do shape_argv+=(--shape "$s"); done
}
shapes_or_sizes() {  # shapes_or_sizes "M,N,K ..." SIZES: those shapes, else --size SIZES, in shape_argv
  if [[ -n $1 ]]; then shape_args $1; else shape_argv=(--size "$2"); fi
}
levels_where() {  # comma list of registry levels satisfying a Python predicate on `lv`
  python3 -c "from numba_gemm.registry import registry; print(','.join(n for n, lv in registry().items() if $1))"
}

if runs env; then
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
    python3 -c "import numpy, numba, numba_cuda, cuda.bindings; print('numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'cuda-bindings', cuda.bindings.__version__)"
    git rev-parse --short HEAD 2>/dev/null; date -u; } >"$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi
if runs warm; then  # compile once: every later step loads cubins instead of compiling
  timeout $(cap 420) python3 -m numba_gemm warm ${WARM_LEVELS:+--level "$WARM_LEVELS"} --census --jobs "$(nproc)" >"$OUT/warm.txt" 2>&1
  echo "warm (exit $?): $(grep -E "^(total|census:)" "$OUT/warm.txt" | tr "\n" " ")"
fi
# the test chunks (see the header); the last is every test file the others do not name
TEST_CHUNK1="tests/test_sgemm.py tests/test_sgemm_geometry.py tests/test_twins.py"
TEST_CHUNK2="tests/test_hgemm.py tests/test_v8py.py"
TEST_CHUNK3="tests/test_hopper.py tests/test_wgmma_tiles.py tests/test_ptx_intrinsics.py tests/test_tma.py
  tests/test_nvrtc.py tests/test_cache.py tests/test_v11gv.py tests/test_v11t.py"
TEST_CHUNK4="tests/test_sass.py tests/test_k7_k8.py tests/test_intrinsics.py tests/test_microbench.py"
TEST_CHUNK5="tests/test_splitk_sgemm.py tests/test_v11sk.py tests/test_v11sl.py tests/test_v11p.py
  tests/test_v11r.py tests/test_v11py.py tests/test_numba_cache.py tests/test_first_call.py"
TEST_CHUNKS=6
chunk_files() {
  if (( $1 < TEST_CHUNKS )); then local v="TEST_CHUNK$1"; echo ${!v}; return; fi
  local named=" $(echo $TEST_CHUNK1 $TEST_CHUNK2 $TEST_CHUNK3 $TEST_CHUNK4 $TEST_CHUNK5) " f
  for f in tests/test_*.py; do [[ $named == *" $f "* ]] || echo -n "$f "; done
  echo
}
run_tests() {  # run_tests NAME FILES...: one pytest run, its log and summary line
  local log="$OUT/pytest_$1.log" limit; shift
  limit=$(cap $(( ${TEST_TIMEOUT:-360} + 30 ))); limit=$(( limit > 31 ? limit - 30 : 1 ))   # 30 s for -k
  # past TEST_TIMEOUT pytest gets an interrupt, so the log still ends with its durations
  # (PYTEST_ARGS=--durations=N) and the traceback of what was running
  timeout -s INT -k 30 "$limit" python3 -m pytest -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} "$@" >"$log" 2>&1
  local rc=$? cut=""
  grep -q "KeyboardInterrupt" "$log" && cut=", cut at $limit s"
  echo "$(basename "$log" .log) (exit $rc$cut): $(tail -n 1 "$log")"
}
run_chunk() {
  if ! (( $1 >= 1 && $1 <= TEST_CHUNKS )) 2>/dev/null; then echo "tests: no chunk '$1' (1..$TEST_CHUNKS)"; return; fi
  run_tests "tests$1" $(chunk_files "$1")
  if (( $1 < TEST_CHUNKS )); then echo "next: bash tools/gpu_run.sh tests$(($1 + 1))"; fi
}
if runs tests; then
  if [[ -n ${TEST_FILES:-} ]]; then run_tests files $TEST_FILES; else run_chunk "${TEST_CHUNK:-1}"; fi
fi
for i in $(seq 1 $TEST_CHUNKS); do
  if runs "tests$i"; then run_chunk "$i"; fi
done
# every native level on a small ragged shape, each checked for exactness. After the tests: on the
# GPU machine (NVRTC 13.0) a source compiled again came back without a ptxas log, after
# compute-sanitizer and after a plain warm step, and the census tests that read its spill lines
# failed; NVRTC's own cache serves such compiles, and runtime/nvrtc.py now passes --no-cache
# (docs/RESULTS.md, thirty-seventh run; confirmed by chunk 3 after a warm step, thirty-eighth run)
if runs sanitize; then
  native=${SANITIZE_LEVELS:-$(levels_where "lv.native")}
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    timeout $(cap 240) compute-sanitizer --tool $tool --error-exitcode 9 \
      python3 tools/run_once.py --level "$native" --shape "${SANITIZE_SHAPE:-127,200,72}" >"$OUT/sanitize_$tool.txt" 2>&1
    echo "compute-sanitizer $tool ($native): exit $? — $(grep -c WRONG "$OUT/sanitize_$tool.txt") wrong, $(grep -E "(ERROR|RACECHECK|SYNCCHECK) SUMMARY" "$OUT/sanitize_$tool.txt" | tail -n 1)"
  done
fi
if runs sgemm; then
  shapes_or_sizes "${SGEMM_SHAPES:-}" "${SIZES:-4096,4097,8192}"
  timeout $(cap 420) python3 bench.py --level "${LEVELS:-sgemm}" "${shape_argv[@]}" --json "$OUT/sgemm.json" >"$OUT/sgemm.txt" 2>&1
  cat "$OUT/sgemm.txt"
fi
if runs hgemm; then
  shapes_or_sizes "${HGEMM_SHAPES:-}" 4096,8192
  for dt in ${HGEMM_DTYPES:-fp16 bf16}; do
    timeout $(cap 300) python3 bench.py --level "${HGEMM_LEVELS:-hgemm}" "${shape_argv[@]}" --dtype $dt --json "$OUT/hgemm_$dt.json" >"$OUT/hgemm_$dt.txt" 2>&1
    cat "$OUT/hgemm_$dt.txt"
  done
fi
if runs shapes; then  # ~20 user shapes: auto, the best level, cuBLAS, roofline; kernel time and loops
  for dt in ${SHAPES_DTYPES:-fp32 fp16 bf16}; do
    if [[ -n ${BUDGET:-} ]] && (( BUDGET - SECONDS < 100 )); then skipped+=("shapes($dt)"); continue; fi
    timeout $(cap 400) python3 bench.py --suite shapes --dtype $dt ${SHAPES_ONLY:+--only "$SHAPES_ONLY"} \
      --json "$OUT/shapes_$dt.json" >"$OUT/shapes_$dt.txt" 2>&1
    tail -n 26 "$OUT/shapes_$dt.txt"
  done
fi
if runs gemv; then  # v11gv beside the levels auto weighs against it at M <= 2 (bench.py JSON, what calibrate_auto reads)
  shape_args ${GEMV_SHAPES:-1,4096,4096 2,4096,4096 1,8192,8192 1,14336,4096 2,4096,11008 1,4096,14336 2,1000,776}
  for dt in ${GEMV_DTYPES:-fp16 bf16}; do
    timeout $(cap 240) python3 bench.py --level "${GEMV_LEVELS:-v11gv,v11gv:splits=4,v11t,v11sk,v11sl}" "${shape_argv[@]}" \
      --dtype $dt --json "$OUT/gemv_$dt.json" >"$OUT/gemv_$dt.txt" 2>&1
    grep -E "^ *v11" "$OUT/gemv_$dt.txt"
  done
fi
if runs plans; then  # each cluster level's plan beside the split the SMs alone would size, interleaved
  for dt in ${PLANS_DTYPES:-fp16 bf16}; do
    for s in ${PLANS_SHAPES:-16,1024,4096 1,2048,4096 32,2048,8192 64,1024,4096 128,2048,4096 256,1024,4096}; do
      levels=$(python3 -c "from numba_gemm.registry import get
from numba_gemm.hgemm import _common as cm
M, N, K = $s
out = []
for name in '${PLANS_LEVELS:-v11t,v11sl,v11gv}'.split(','):
    lv = get(name)
    if lv.unsupported(M, N, K) is None:
        got = lv.module.plan_splits(M, N, K, sms=cm.sm_count())
        S = got[1] if isinstance(got, tuple) else got
        out += [name] + ([f'{name}:splits={S}'] if S > 1 else [])
print(','.join(out))")
      [[ -n $levels ]] || continue
      name="plans_${dt}_${s//,/x}"
      timeout $(cap 120) python3 bench.py --level "$levels" --shape "$s" --dtype $dt --json "$OUT/$name.json" >"$OUT/$name.txt" 2>&1
      grep -E "^ *v11" "$OUT/$name.txt"
    done
  done
fi
if runs residency; then  # clusters of each size that fit at once, against the plans' grids
  shape_args ${RESIDENCY_SHAPES:-}
  timeout $(cap 120) python3 tools/cluster_residency.py --level "${RESIDENCY_LEVELS:-v11sl,v11t,v11gv}" \
    "${shape_argv[@]}" --json "$OUT/residency.json" >"$OUT/residency.txt" 2>&1
  echo "residency (exit $?)"; cat "$OUT/residency.txt"
fi
if runs skinny; then  # v11t beside v11sl and v11sk at M <= 64 (bench.py JSON, what calibrate_auto reads)
  shape_args ${SKINNY_SHAPES:-4,8192,8192 8,4096,11008 16,4096,4096 16,8192,8192 16,14336,4096 32,8192,8192 64,4096,4096 64,14336,4096 3,1000,776}
  for dt in ${SKINNY_DTYPES:-fp16 bf16}; do
    timeout $(cap 240) python3 bench.py --level "${SKINNY_LEVELS:-v11t,v11sl,v11sk}" "${shape_argv[@]}" \
      --dtype $dt --json "$OUT/skinny_$dt.json" >"$OUT/skinny_$dt.txt" 2>&1
    grep -E "^ *v11" "$OUT/skinny_$dt.txt"
  done
fi
if runs tiles; then  # every wgmma level and tile auto may rank, timed together (bench.py JSON for calibrate_auto)
  levels=${TILE_LEVELS:-$(python3 -c "from numba_gemm import choose, registry as r
print(','.join(n for b in ('v11', 'v11sk', 'v11sl', 'v11t', 'v12', 'v13')
               for n in [b] + [r.spec_name(b, kw) for kw, _ in choose.tile_choices(r.get(b))]))")}
  shapes=${TILE_SHAPES:-$(python3 -c "from numba_gemm import choose; from numba_gemm.measure.shapes import SUITE
print(' '.join(f'{M},{N},{K}' for _, M, N, K in SUITE if M > 2 and choose.aligned(N, K, 2)))") ${TILE_MORE:-}}
  tiles_start=$SECONDS
  [[ -n ${BUDGET:-} && -z ${TILE_BUDGET:-} ]] && TILE_BUDGET=$(( BUDGET - SECONDS - 20 ))
  for dt in ${TILE_DTYPES:-fp16}; do
    set -- $shapes; parts=()
    while (( $# )); do           # four shapes per process: a process cut by its timeout loses only those
      if [[ -n ${TILE_BUDGET:-} ]] && (( SECONDS - tiles_start + ${TILE_TIMEOUT:-150} > TILE_BUDGET )); then
        echo "tiles $dt: TILE_BUDGET spent; not run: TILE_SHAPES=\"$*\""; break
      fi
      shape_args "${@:1:4}"; group=("${shape_argv[@]}"); shift $(( $# < 4 ? $# : 4 ))
      part="$OUT/tiles_${dt}_${#parts[@]}.json"; parts+=("$part")
      timeout "$(cap "${TILE_TIMEOUT:-150}")" python3 bench.py --level "$levels" "${group[@]}" --dtype "$dt" \
        --json "$part" >>"$OUT/tiles_$dt.txt" 2>&1 || echo "tiles $dt: ${group[*]} ended with exit $?"
    done
    python3 -c "import json, os, sys
rows = [r for f in sys.argv[2:] if os.path.exists(f) for r in json.load(open(f))]
json.dump(rows, open(sys.argv[1], 'w'), indent=2)
print(f'tiles {sys.argv[1]}: {len(rows)} rows, {sum(r[\"ok\"] is False for r in rows)} wrong')" "$OUT/tiles_$dt.json" "${parts[@]}"
    rm -f "${parts[@]}"
  done
fi
if runs curve; then  # TFLOPS vs size, kernel time, for the top of both ladders
  timeout $(cap 420) python3 bench.py --level "${CURVE_LEVELS:-k5,k6,k7,k8,hgemm}" --size 512,1024,2048,4096,8192,16384 \
    --json "$OUT/curve.json" >"$OUT/curve.txt" 2>&1
  tail -n 60 "$OUT/curve.txt"
fi
if runs overhead; then
  # every level compiles on its first call: more than 3 minutes on a fresh machine
  timeout $(cap 420) python3 bench.py --overhead ${OVERHEAD_LEVELS:+--level $OVERHEAD_LEVELS} >"$OUT/overhead.txt" 2>&1
  cat "$OUT/overhead.txt"
fi
if runs micro; then
  timeout $(cap 180) python3 -m numba_gemm.measure.microbench --out "$OUT/h200_costs.json" >"$OUT/micro.txt" 2>&1
  cat "$OUT/micro.txt"
fi
if runs sweep; then
  timeout $(cap 300) python3 tools/hgemm_sweep.py --out "$OUT/hgemm_sweep.json" >"$OUT/hgemm_sweep.txt" 2>&1
  tail -n 45 "$OUT/hgemm_sweep.txt"
fi
if runs notebook; then  # docs/ladder.ipynb executed on this GPU, outputs in $OUT/ladder.ipynb (no Jupyter needed)
  timeout $(cap 250) python3 tools/run_notebook.py docs/ladder.ipynb --out "$OUT/ladder.ipynb" --timeout $(cap 240) >"$OUT/notebook.txt" 2>&1
  echo "notebook: exit $? — $(tail -n 3 "$OUT/notebook.txt" | tr '\n' ' ')"
fi
if runs ncu; then   # L2 reuse of v8 vs v9 at 8192, and k1's power-of-two stride at 4096 vs 4097
  { timeout $(cap 150) python3 tools/hgemm_sweep.py --ncu --configs base
    for n in 4096 4097; do
      timeout $(cap 60) ncu --clock-control none --launch-skip 1 --launch-count 1 --metrics \
        l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum \
        python3 tools/run_once.py --level k1 --size $n
    done; } >"$OUT/ncu.txt" 2>&1
  grep -E "^  [a-z_]+__|==PROF==|v8_|v9_|kernel|n=|size" "$OUT/ncu.txt" | tail -n 40
fi
if runs profile; then  # where the time goes: one launch per level under ncu's main sections
  for lv in $(echo "${PROFILE_LEVELS:-v11,v12,v13,cublas}" | tr , ' '); do
    shape=${PROFILE_SHAPE:+--shape $PROFILE_SHAPE}
    echo "=== $lv ${PROFILE_SHAPE:-${PROFILE_SIZE:-4096}} ${PROFILE_DTYPE:-float16}"
    timeout $(cap 120) ncu --clock-control none --launch-skip "${PROFILE_SKIP:-1}" --launch-count "${PROFILE_COUNT:-1}" \
      --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section LaunchStats --section Occupancy \
      --metrics sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_ltcfabric.sum \
      python3 tools/run_once.py --level "$lv" ${shape:---size "${PROFILE_SIZE:-4096}"} --dtype "${PROFILE_DTYPE:-float16}"
  done >"$OUT/profile.txt" 2>&1
  grep -E "^===|^  [a-zA-Z_]+ |Duration|Throughput|SM Frequency|Stall|Issued|Registers|Warp Cycles|L2 Hit|Mem Busy|Max Bandwidth|per_second|bytes|sectors" "$OUT/profile.txt" | head -n 150
fi
if runs top; then  # every competitor checked on ragged shapes first, then timed interleaved
  timeout $(cap 540) python3 tools/hopper_top.py --levels "${TOP_LEVELS:-v11,v12,v13}" --sizes "${TOP_SIZES:-2048,4096,8192}" \
    --check-shapes "${TOP_SHAPES:-127,200,72 300,520,64 1000,1000,1000 129,264,8 1,8,8 385,1032,200 64,136,4096}" \
    --json "$OUT/top.json" ${TOP_ARGS:-} >"$OUT/top.txt" 2>&1
  echo "top (exit $?): $(grep -c ': ok' "$OUT/top.txt") checks ok, $(grep -c WRONG "$OUT/top.txt") wrong"
  grep -E "WRONG|Error" "$OUT/top.txt" | head -n 10
  sed -n '/^dtype/,$p' "$OUT/top.txt"
fi
if runs firstcall; then  # cold and cached first calls, each in a fresh process (own cache dirs)
  timeout "$(cap "${FIRSTCALL_TIMEOUT:-540}")" python3 tools/first_call.py --out "$OUT/first_call.json" --jobs "$(nproc)" \
    ${FIRSTCALL_LEVELS:+--level $FIRSTCALL_LEVELS} >"$OUT/first_call.txt" 2>&1
  echo "first_call (exit $?):"; tail -n 25 "$OUT/first_call.txt"
fi
if (( ${#skipped[@]} )); then echo "not started within BUDGET=$BUDGET s: ${skipped[*]}"; fi
# at most a few files come back from a remote run: the logs travel as one archive beside the JSON
if [[ -n ${PACK_LOGS:-} ]]; then
  (cd "$OUT" && tar czf logs.tar.gz --remove-files $(ls *.txt *.log 2>/dev/null))
fi
if [[ -n ${PACK_CACHE:-} && -d $NUMBA_GEMM_CACHE_DIR ]]; then
  tar czf "$OUT/kernel_cache.tar.gz" -C "$(dirname "$NUMBA_GEMM_CACHE_DIR")" "$(basename "$NUMBA_GEMM_CACHE_DIR")"
  echo "kernel cache: $(du -h "$OUT/kernel_cache.tar.gz" | cut -f1) in kernel_cache.tar.gz"
fi
