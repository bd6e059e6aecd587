// k8es twin: k8e's launches (k8e.cu's copy, strip and tail kernels, under this level's names)
// with the interior by k9st's body over the interior's tiles (tiles_n across, the rows of the
// view it is given); where the interior's tiles are whole waves the host runs k8e's twin.
#define K8E_LEVEL k8es
#include "k8e.cu"
#define K9ST_BODY_ONLY
#include "k9st.cu"

WT_KERNEL k8es(K9ST_ARGS) { k9st_body<true, true>(M, N, K, tiles_n, whole, alpha, A, B, beta, C, P, counters); }
