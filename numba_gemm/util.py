"""Small pure helpers shared by both families (no Numba, no CUDA)."""
import os
import subprocess


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for integers, b > 0: the number of b-sized tiles that cover a."""
    return -(-a // b)


def commit() -> str:
    """The commit a measurement ran at: NUMBA_GEMM_COMMIT when set (a copy of the checkout sent
    to another machine may carry a stale .git), else the checkout's, '+changes' when tracked
    files differ from it; 'unknown' outside git."""
    if os.environ.get("NUMBA_GEMM_COMMIT"):
        return os.environ["NUMBA_GEMM_COMMIT"]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=here, timeout=10).returncode
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+changes" if dirty else "")
