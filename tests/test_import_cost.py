"""Import only what a command needs: the theory and the command line start without the heavy optional libraries
(PyTorch, matplotlib: the extras; scipy.stats: about 2 s on its own, and the Sobol points it draws are read back
from the disk cache, docs/numerics.md).  Checked in a fresh interpreter, where sys.modules shows every import."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import TESTS_DIR

HEAVY = ("torch", "matplotlib", "scipy.stats", "pandas")


def _imported_after(code: str, env: dict[str, str] | None = None) -> list[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    full_env = {**os.environ, "PYTHONPATH": str(TESTS_DIR.parent / "src"), **(env or {})}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=full_env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_theory_and_the_cli_pulls_in_no_heavy_library():
    assert _imported_after("import attnphase.theory") == []
    assert _imported_after("import attnphase.cli\nattnphase.cli.build_parser()") == []
    assert _imported_after("import attnphase, attnphase.setting, attnphase.theory.prox") == []


def test_sobol_points_from_a_warm_cache_need_no_scipy_stats(tmp_path):
    env = {"ATTNPHASE_CACHE_DIR": str(tmp_path)}
    draw = "from attnphase.theory.model.quadrature import gaussian_sobol\ngaussian_sobol(6, 4, 3)"
    assert "scipy.stats" in _imported_after(draw, env)  # the first draw: scipy's generator, written to the cache
    assert list(tmp_path.glob("sobol-gauss-6-4-3-*.npy"))
    assert _imported_after(draw, env) == []  # read back
