"""numba_gemm.ptx.inline_copy: Numba's inliner copies a callee's blocks with one memo, and the
kernels compile to the same PTX, byte for byte, as with the inliner as numba-cuda ships it
(tools/compile_times.py)."""
import copy
import os
import subprocess
import sys

from numba_gemm.ptx import inline_copy

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "compile_times.py")


class Scope:
    def __init__(self, names):
        self.localvars = {n: Var(self, n) for n in names}


class Var:
    def __init__(self, scope, name):
        self.scope, self.name = scope, name


class Block:
    def __init__(self, scope, names):
        self.scope, self.body = scope, [scope.localvars[n] for n in names]


def an_ir():
    scope = Scope("abcd")
    return scope, [Block(scope, "ab"), Block(scope, "bc"), Block(scope, "cd")]


def test_the_blocks_of_one_ir_share_one_copy_of_its_scope():
    shim = inline_copy._OneMemoPerIR(Block)
    scope, blocks = an_ir()
    copies = [shim.deepcopy(b) for b in blocks]
    assert len({id(c.scope) for c in copies}) == 1                # one scope copy ...
    assert copies[0].scope is not scope                           # ... and a copy, not the original
    assert copies[0].body[1] is copies[1].body[0]                 # 'b' of both blocks: one variable
    assert copies[0].body[1] is copies[0].scope.localvars["b"]
    # as numba-cuda ships it, each block copies the scope again
    plain = [copy.deepcopy(b) for b in blocks]
    assert len({id(c.scope) for c in plain}) == 3


def test_a_second_copy_of_the_same_ir_is_new():
    shim = inline_copy._OneMemoPerIR(Block)
    _, blocks = an_ir()
    first = [shim.deepcopy(b) for b in blocks]
    second = [shim.deepcopy(b) for b in blocks]
    assert first[0].scope is not second[0].scope
    assert not {id(v) for b in first for v in b.body} & {id(v) for b in second for v in b.body}


def test_another_ir_starts_a_new_memo():
    shim = inline_copy._OneMemoPerIR(Block)
    _, one = an_ir()
    _, two = an_ir()
    a, b = shim.deepcopy(one[0]), shim.deepcopy(two[0])
    assert a.scope is not b.scope


def test_everything_else_passes_through():
    shim = inline_copy._OneMemoPerIR(Block)
    memo = {}
    x = {"k": [1, 2]}
    y = shim.deepcopy(x, memo)
    assert y == x and y is not x and id(x) in memo
    _, blocks = an_ir()
    assert shim.deepcopy(blocks[0], {}).scope is not shim.deepcopy(blocks[0], {}).scope   # a memo given: used
    assert shim.copy is copy.copy


def test_install_gives_the_inliner_one_shim():
    from numba.cuda.core import inline_closurecall

    assert inline_copy.install()
    shim = inline_closurecall.copy
    assert inline_copy.install() and inline_closurecall.copy is shim
    assert isinstance(shim, inline_copy._OneMemoPerIR)


def test_the_kernels_compile_to_the_same_ptx():
    """k6gv and v8py (helpers inlined into helpers: the loaders, ldmatrix and mma.sync), each
    way in its own process, through tools/compile_times.py."""
    out = subprocess.run([sys.executable, TOOL, "--level", "k6gv,v8py"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "6 of 6 the same" in out.stdout, out.stdout


def test_the_same_check_can_fail(monkeypatch):
    sys.path.insert(0, os.path.dirname(TOOL))
    try:
        import compile_times
    finally:
        sys.path.remove(os.path.dirname(TOOL))

    def fake(levels, plain):
        return {"installed": True, "kernels": {"k": [1.0, "plain" if plain else "shared"]}}

    monkeypatch.setattr(compile_times, "run_child", fake)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)   # as on a GPU: main() must not set it
    env = dict(os.environ)
    assert compile_times.main(["--level", "k6gv"]) == 1
    assert dict(os.environ) == env      # no NUMBA_ENABLE_CUDASIM left behind for later tests
