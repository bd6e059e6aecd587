"""128-bit loads and stores for numba.cuda kernels.

Numba has no float4: indexing a float32 array always emits 32-bit loads. These intrinsics
move four consecutive floats with ONE instruction: `ld.global.v4.f32` / `st.global.v4.f32`
for device arrays, `ld.shared.v4.f32` / `st.shared.v4.f32` for shared arrays. The index is
written as for plain indexing: an integer for a 1-D array, a (row, col) tuple for a 2-D one.

    x, y, z, w = load4_global(A, a_off)          # A[a_off : a_off + 4]        (1-D view)
    store4_shared(Bs, (r, c), (x, y, z, w))      # Bs[r, c : c + 4] = x, y, z, w

How: the element pointer is bitcast to `<4 x float>*` and loaded/stored with align 16, a
promise the caller keeps: the byte address must be a multiple of 16 or the GPU stops with
"misaligned address" (declare shared arrays with `alignment=16`; for device arrays check the
base pointer and the row length on the host). For shared memory the generic pointer Numba
keeps in the array is cast back to address space 3, so the backend emits `ld.shared`
instead of a generic `ld` that tests the address window at run time.

`load4_readonly(X, i)` and `load_readonly(X, i)` (one float of a 1-D array) read device
memory through the read-only data path: the load carries `!invariant.load`, so NVVM emits
`ld.global.nc` (SASS LDG.E.CONSTANT), what nvcc emits for a `const float* __restrict__`
argument. The promise: no thread writes that memory while the kernel runs (a GEMM's A and
B; never C).

`load_l2(X, i)` reads one float past the SM's L1 (`ld.global.cg`, SASS LDG.E.STRONG.GPU): for
memory that other CTAs wrote during this kernel, such as the split-K partials a tile's last
CTA adds up. L1 is not coherent across SMs, so a line this SM cached earlier in the kernel
could be stale; L2 is where every SM's stores meet.

The offset is computed in 64 bits (row * ncols + col for 2-D), with no negative-index
wraparound and no bounds check, as in CUDA C. Unsigned indices are zero-extended, signed
ones sign-extended.

In the CUDA simulator an intrinsic has no Python body to run, so each one has a plain
Python twin with the same arguments, chosen when `numba.cuda.config.ENABLE_CUDASIM` is set.
The twins also enforce the 16-byte rule, so a kernel that would fault on the GPU fails in
the simulator too.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)

__all__ = ["load4_global", "store4_global", "load4_shared", "store4_shared", "load4_readonly",
           "load_readonly", "load_l2", "unrolled", "SIMULATOR"]


# ---------------------------------------------------------------------------------------
# Simulator twins: plain indexing plus the alignment check the hardware would make.

def _numpy(arr) -> np.ndarray:
    """The NumPy array behind a simulator array (kernel arguments arrive wrapped, twice)."""
    while not isinstance(arr, np.ndarray):
        inner = vars(arr)
        arr = inner["_item"] if "_item" in inner else inner["_ary"]
    return arr


def _checked(arr, index, check_base):
    """(flat NumPy view, flat index) after the bounds and 16-byte alignment checks."""
    a = _numpy(arr)
    if isinstance(index, tuple):
        row, col = (int(i) for i in index)
        if a.ndim != 2 or not (0 <= row < a.shape[0] and 0 <= col and col + 4 <= a.shape[1]):
            raise IndexError(f"128-bit access at {index} leaves a row of a {a.shape} array")
        flat = row * a.shape[1] + col
    else:
        flat = int(index)
        if a.ndim != 1 or not 0 <= flat <= a.shape[0] - 4:
            raise IndexError(f"128-bit access at {index} outside an array of shape {a.shape}")
    # A simulator shared array is a NumPy array whose base alignment is not ours to choose;
    # on the GPU `alignment=16` guarantees it, so only the offset is checked there.
    address = (a.__array_interface__["data"][0] if check_base else 0) + a.itemsize * flat
    if address % 16:
        raise ValueError(
            f"misaligned 128-bit access at {index}: byte address {address:#x} is not a multiple "
            "of 16 (the GPU stops with 'misaligned address')"
        )
    return a.reshape(-1), flat


def _sim_load4(check_base):
    def load4(arr, index):
        a, i = _checked(arr, index, check_base)
        return a[i], a[i + 1], a[i + 2], a[i + 3]

    return load4


def _sim_load(arr, index):
    a = _numpy(arr)
    if a.ndim != 1 or not 0 <= int(index) < a.shape[0]:
        raise IndexError(f"load at {index} outside an array of shape {a.shape}")
    return a[int(index)]


def _sim_store4(check_base):
    def store4(arr, index, values):
        a, i = _checked(arr, index, check_base)
        a[i], a[i + 1], a[i + 2], a[i + 3] = values

    return store4


# ---------------------------------------------------------------------------------------
# The intrinsics.

def _build_intrinsics():
    from llvmlite import ir
    from numba.cuda import cgutils, types
    from numba.cuda.extending import intrinsic

    GLOBAL, SHARED = 1, 3  # NVPTX address spaces
    f32 = ir.FloatType()
    i32 = ir.IntType(32)
    i64 = ir.IntType(64)
    v4f32 = ir.VectorType(f32, 4)

    def check_types(arr, index):
        if not (isinstance(arr, types.Array) and arr.layout == "C" and arr.dtype == types.float32):
            raise TypeError(f"expected a C-contiguous float32 array, got {arr}")
        if arr.ndim == 1 and isinstance(index, types.Integer):
            return
        if (
            arr.ndim == 2
            and isinstance(index, types.BaseTuple)
            and len(index) == 2
            and all(isinstance(t, types.Integer) for t in index)
        ):
            return
        raise TypeError(f"index a 1-D array with an integer, a 2-D one with (row, col); got {arr}[{index}]")

    def vector_pointer(context, builder, arrty, arr, indexty, index, addrspace):
        """<4 x float> addrspace(N)* at arr[index]: offset row * ncols + col in 64 bits."""
        ary = context.make_array(arrty)(context, builder, arr)

        def widen(value, ty):
            return builder.sext(value, i64) if ty.signed else builder.zext(value, i64)

        if arrty.ndim == 1:
            flat = widen(index, indexty)
        else:
            row, col = cgutils.unpack_tuple(builder, index, 2)
            ncols = cgutils.unpack_tuple(builder, ary.shape, 2)[1]
            flat = builder.add(
                builder.mul(widen(row, indexty[0]), ncols, flags=["nsw"]),
                widen(col, indexty[1]),
                flags=["nsw"],
            )
        elem = builder.gep(ary.data, [flat], inbounds=True)  # generic float*
        typed = builder.addrspacecast(elem, ir.PointerType(f32, addrspace))
        return builder.bitcast(typed, ir.PointerType(v4f32, addrspace))

    def read_only(builder, load):
        """Mark `load` as reading memory no thread writes while the kernel runs: NVVM then
        emits ld.global.nc (SASS LDG.E.CONSTANT, the read-only data path), as nvcc does for a
        `const float* __restrict__` argument."""
        load.set_metadata("invariant.load", builder.module.add_metadata([]))
        return load

    def make_load(addrspace, name, readonly=False):
        def load4(typingctx, arr, index):
            check_types(arr, index)
            sig = types.UniTuple(types.float32, 4)(arr, index)

            def codegen(context, builder, signature, args):
                ptr = vector_pointer(context, builder, arr, args[0], index, args[1], addrspace)
                vec = builder.load(ptr, align=16)
                if readonly:
                    read_only(builder, vec)
                parts = [builder.extract_element(vec, ir.Constant(i32, i)) for i in range(4)]
                return context.make_tuple(builder, signature.return_type, parts)

            return sig, codegen

        load4.__name__ = name
        return intrinsic(load4)

    def make_scalar_load(name, emit):
        """An intrinsic X[i] for a 1-D float32 array: emit(builder, generic float* to the element)."""
        def load(typingctx, arr, index):
            if not (isinstance(arr, types.Array) and arr.layout == "C" and arr.ndim == 1
                    and arr.dtype == types.float32 and isinstance(index, types.Integer)):
                raise TypeError(f"expected a 1-D C-contiguous float32 array and an integer, got {arr}[{index}]")

            def codegen(context, builder, signature, args):
                ary = context.make_array(arr)(context, builder, args[0])
                flat = builder.sext(args[1], i64) if index.signed else builder.zext(args[1], i64)
                return emit(builder, builder.gep(ary.data, [flat], inbounds=True))

            return types.float32(arr, index), codegen

        load.__name__ = name
        return intrinsic(load)

    def emit_readonly(builder, elem):
        ptr = builder.addrspacecast(elem, ir.PointerType(f32, GLOBAL))
        return read_only(builder, builder.load(ptr, align=4))

    def emit_l2(builder, elem):
        # volatile asm: it stays after the fence and the barrier that make the data ready
        ld = ir.InlineAsm(ir.FunctionType(f32, [elem.type]), "ld.global.cg.f32 $0, [$1];", "=f,l",
                          side_effect=True)
        return builder.call(ld, [elem])

    def make_store(addrspace, name):
        def store4(typingctx, arr, index, values):
            check_types(arr, index)
            if not (
                isinstance(values, types.BaseTuple)
                and len(values) == 4
                and all(isinstance(t, (types.Float, types.Integer)) for t in values)
            ):
                raise TypeError(f"values must be a tuple of 4 numbers, got {values}")
            sig = types.void(arr, index, values)

            def codegen(context, builder, signature, args):
                ptr = vector_pointer(context, builder, arr, args[0], index, args[1], addrspace)
                vec = ir.Constant(v4f32, ir.Undefined)
                for i, (value, ty) in enumerate(zip(cgutils.unpack_tuple(builder, args[2], 4), values)):
                    value = context.cast(builder, value, ty, types.float32)
                    vec = builder.insert_element(vec, value, ir.Constant(i32, i))
                builder.store(vec, ptr, align=16)
                return context.get_dummy_value()

            return sig, codegen

        store4.__name__ = name
        return intrinsic(store4)

    return (
        make_load(GLOBAL, "load4_global"),
        make_store(GLOBAL, "store4_global"),
        make_load(SHARED, "load4_shared"),
        make_store(SHARED, "store4_shared"),
        make_load(GLOBAL, "load4_readonly", readonly=True),
        make_scalar_load("load_readonly", emit_readonly),
        make_scalar_load("load_l2", emit_l2),
    )


def unrolled(step, count: int):
    """A device function `f(start, *args)` that calls `step(start + i, *args)` for i in 0..count-1
    as straight-line code: the loop unrolled before the compiler sees it.

    The counterpart of `#pragma unroll`, which Numba lacks. NVVM fully unrolls a constant-trip
    loop only when trip count × body size is small (k3's one-FMA body qualifies); k6's 32 steps
    of 3 LDS.128 + 32 FFMA do not, and the loop stays a loop, unrolled ×2, with loop-counter
    and address arithmetic between the FFMAs. `step` must be a device function with
    inline="always" (inlined in Numba IR, so no compiled device function is needed, which
    would require a GPU at compile time); each copy costs about 0.2 s of compile time.
    """
    import inspect

    params = list(inspect.signature(getattr(step, "py_func", step)).parameters)[1:]
    args = ", ".join(params)
    body = "".join(f"    step(start + {i}, {args})\n" for i in range(count))
    namespace = {"step": step}
    exec(f"def unrolled(start, {args}):\n{body}", namespace)
    if SIMULATOR:
        return namespace["unrolled"]
    return cuda.jit(device=True, inline="always")(namespace["unrolled"])


if SIMULATOR:
    load4_global, store4_global = _sim_load4(True), _sim_store4(True)
    load4_shared, store4_shared = _sim_load4(False), _sim_store4(False)
    load4_readonly, load_readonly, load_l2 = load4_global, _sim_load, _sim_load
else:
    (load4_global, store4_global, load4_shared, store4_shared,
     load4_readonly, load_readonly, load_l2) = _build_intrinsics()
