"""Small pure helpers shared by both families (no Numba, no CUDA)."""


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for integers, b > 0: the number of b-sized tiles that cover a."""
    return -(-a // b)
