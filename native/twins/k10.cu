// k10 twin: k9's kernel on k10's tile (numba_gemm/sgemm/k10_wide.py, TILING), which the -D options
// carry: 128×256 per block, 8×16 per thread, __launch_bounds__(256, 1). Nothing else differs.
#define K9_LEVEL k10
#include "k9.cu"
