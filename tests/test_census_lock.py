"""The census lock: a second process that wants censuses while one is taking them waits for it
(and then reads them from the cache), while the holder's own census children do not wait; and
those children are dealt kernels, not levels."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from numba_gemm.explain import census_cache

ROOT = Path(__file__).resolve().parent.parent
WANT = ("from numba_gemm.explain import census_cache\nprint('asking', flush=True)\n"
        "with census_cache.one_taker(): print('in', flush=True)\n")


def _child(env):
    env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-c", WANT], stdout=subprocess.PIPE, text=True, env=env)


def test_a_second_process_waits_for_the_holder_and_its_children_do_not(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(census_cache._HELD, raising=False)
    with census_cache.one_taker():
        inherited = _child(dict(os.environ))        # a census child: the holder's environment
        assert inherited.communicate(timeout=60)[0] == "asking\nin\n"
        other = _child({k: v for k, v in os.environ.items() if k != census_cache._HELD})
        assert other.stdout.readline() == "asking\n"
        time.sleep(1)
        assert other.poll() is None, "a second process took the census lock while it was held"
    assert other.communicate(timeout=60)[0] == "in\n"
    assert census_cache._HELD not in os.environ


def test_children_take_kernels_not_levels(monkeypatch):
    """in_children deals kernels, so one level's kernels compile in different processes."""
    calls = []

    def fake(cmd, env):
        calls.append(cmd[cmd.index("--kernels") + 1:])
        return subprocess.CompletedProcess(cmd, 0, json.dumps({k: {"kernel": k} for k in calls[-1]}), "")

    monkeypatch.setattr(census_cache, "_run_streaming_progress", fake)
    monkeypatch.setattr(census_cache.os, "cpu_count", lambda: 4)
    kernels = ["k9st:k9st", "k9st:k9st_edge", "k9st:k9st_bc", "k9st:k9st_a", "k1:k1"]
    got = census_cache.in_children(kernels)
    assert list(got) == kernels and got["k1:k1"] == {"kernel": "k1:k1"}
    assert sorted(map(len, calls)) == [1, 1, 1, 2]
    assert all(sum(k.startswith("k9st:") for k in group) == 1 for group in calls)
