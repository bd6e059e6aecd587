#!/usr/bin/env bash
# The whole GPU check in one command: environment, GPU tests, the benchmark tables, the seed's CUDA C
# yardstick and the microbenchmarks. Logs and JSON go to $OUT (default ./out); a short table last.
#   bash tools/gpu_run.sh [steps...]     steps: env sgemm hgemm micro seed sweep ncu tests
#   (default: env sgemm hgemm micro seed tests; LEVELS/SIZES/PYTEST_ARGS narrow the sgemm/tests steps)
# Wheels in .whl/ (e.g. a NumPy < 2.5 for the machine's Python) are installed first if present.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
steps=${*:-"env tests sgemm hgemm seed micro"}
has() { [[ " $steps " == *" $1 "* ]]; }

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$OUT/install.log" 2>&1 \
  || echo "editable install failed (see install.log)"

if has env; then
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
    python3 -c "import numpy, numba, numba_cuda, cuda.bindings; print('numpy', numpy.__version__, 'numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'cuda-bindings', cuda.bindings.__version__)"
    git rev-parse --short HEAD 2>/dev/null; date -u; } >"$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
fi
if has sgemm; then
  timeout 300 python3 bench.py --level "${LEVELS:-sgemm}" --size "${SIZES:-4096,4097}" --json "$OUT/sgemm.json" >"$OUT/sgemm.txt" 2>&1
  cat "$OUT/sgemm.txt"
fi
if has hgemm; then
  timeout 300 python3 bench.py --level hgemm --size 4096,8192 --json "$OUT/hgemm.json" >"$OUT/hgemm.txt" 2>&1
  cat "$OUT/hgemm.txt"
fi
if has micro; then
  timeout 120 python3 -m numba_gemm.microbench --out "$OUT/h200_costs.json" >"$OUT/micro.txt" 2>&1
  cat "$OUT/micro.txt"
fi
if has seed && [ -f .ref/seed_sgemm.cu ]; then
  (nvcc -arch=sm_90 -O3 -o /tmp/seed_sgemm .ref/seed_sgemm.cu && timeout 200 /tmp/seed_sgemm) >"$OUT/seed.txt" 2>&1
  cat "$OUT/seed.txt"
fi
if has sweep; then
  timeout 300 python3 tools/hgemm_sweep.py --out "$OUT/hgemm_sweep.json" >"$OUT/hgemm_sweep.txt" 2>&1
  tail -n 45 "$OUT/hgemm_sweep.txt"
fi
if has ncu; then   # L2 reuse of v8 vs v9 at 8192, and k1's power-of-two stride at 4096 vs 4097
  { timeout 150 python3 tools/hgemm_sweep.py --ncu --configs base
    for n in 4096 4097; do
      timeout 60 ncu --clock-control none --launch-skip 1 --launch-count 1 --metrics \
        l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum \
        python3 tools/run_once.py --level k1 --size $n
    done; } >"$OUT/ncu.txt" 2>&1
  grep -E "^  [a-z_]+__|==PROF==|v8_|v9_|kernel|n=|size" "$OUT/ncu.txt" | tail -n 40
fi
if has tests; then
  timeout "${TEST_TIMEOUT:-420}" python3 -m pytest -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} 2>&1 | tail -n 80 >"$OUT/pytest.log"
  tail -n 3 "$OUT/pytest.log"
fi
