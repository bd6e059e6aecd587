"""Measuring: what bench.py runs, timing, checks, the shape suite, cuBLAS, microbenchmarks, twins.
May import every other part of the package; nothing in the package imports it but measure/ itself."""
