"""A level's call captured in a CUDA graph with the driver's stream capture, replayed: shared by
the tests of the levels that launch more than one kernel or keep state between launches (v11sk,
v11sl, v11p, v11gv in fp16; k8p, k8e and k9st in fp32)."""
import numpy as np

from numba_gemm.measure import check


def replays_exactly(level: str, M: int, N: int, K: int, rng, alpha=0.5, beta=-2.0, dtype=np.float16) -> None:
    """gemm(level) on a non-blocking stream: a warm-up (which allocates what the level keeps),
    then a capture that must not run, two replays giving the eager bytes, and a replay after A
    changed in place that is exact against float64."""
    import numba_gemm
    from cuda.bindings import driver as drv
    from numba import cuda

    def ok(r):
        err = r[0] if isinstance(r, tuple) else r
        assert err == drv.CUresult.CUDA_SUCCESS, err
        return r[1] if isinstance(r, tuple) and len(r) > 1 else None

    A, B, _ = check.random_inputs(M, N, K, dtype, rng)
    family = "sgemm" if dtype == np.float32 else "hgemm"
    C0 = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    cuda.current_context()
    stream = ok(drv.cuStreamCreate(1))                     # non-blocking
    h = int(stream)
    ns = cuda.external_stream(h)                           # the arrays' producer stream is h
    dA, dB, dC = cuda.to_device(A, stream=ns), cuda.to_device(B, stream=ns), cuda.to_device(C0, stream=ns)
    ns.synchronize()
    numba_gemm.gemm(dA, dB, dC, alpha=alpha, beta=beta, level=level, stream=h)   # warm-up
    ok(drv.cuStreamSynchronize(stream))
    eager = dC.copy_to_host(stream=ns)
    ns.synchronize()
    assert check.verify(eager, A, B, C0, alpha, beta, family=family).ok

    def reset():
        dC.copy_to_device(C0, stream=ns)
        ns.synchronize()

    reset()
    ok(drv.cuStreamBeginCapture(stream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
    numba_gemm.gemm(dA, dB, dC, alpha=alpha, beta=beta, level=level, stream=h)
    graph = ok(drv.cuStreamEndCapture(stream))
    exe = ok(drv.cuGraphInstantiate(graph, 0))
    assert np.array_equal(dC.copy_to_host(), C0)           # captured, not run
    for _ in range(2):
        reset()
        ok(drv.cuGraphLaunch(exe, stream))
        ok(drv.cuStreamSynchronize(stream))
        assert dC.copy_to_host().tobytes() == eager.tobytes()
    A2 = rng.uniform(-1, 1, (M, K)).astype(dtype)          # new values in the same buffer
    dA.copy_to_device(A2, stream=ns)
    reset()
    ok(drv.cuGraphLaunch(exe, stream))
    ok(drv.cuStreamSynchronize(stream))
    assert check.verify(dC.copy_to_host(), A2, B, C0, alpha, beta, family=family).ok
    ok(drv.cuGraphExecDestroy(exe))
    ok(drv.cuGraphDestroy(graph))
    ok(drv.cuStreamDestroy(stream))
