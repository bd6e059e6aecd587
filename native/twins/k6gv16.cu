// k6gv16 twin: k6gv's twin at the level's 16-row tile (-DTILE_M=16 -DTHREAD_M=2 from k6gv16's
// GEOMETRY): 64 accumulators a lane, four broadcast LDS.128 of A per k, the warps' partial tiles
// summed in two rounds of 8 rows. The same body; only the kernels' names are this level's.
#define K6GV_VECTOR k6gv16
#define K6GV_EDGE k6gv16_edge
#include "k6gv.cu"
