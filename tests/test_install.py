"""The light install: `pip install attnphase` without extras gives the theory and refuses the simulations in
one line.  Builds a clean virtual environment (about 1.5 minutes), so it is marked `install` and run by
`make check-light-install` (CI), not by the default suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.install
def test_light_install_runs_theory_and_names_the_missing_extra(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # a copy of what a source distribution holds, so that the build leaves nothing in the working tree
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([str(bin_dir / "pip"), "install", "--quiet", str(source)], check=True, env=env, cwd=tmp_path)
    installed = subprocess.run([str(bin_dir / "pip"), "list", "--format=freeze"], check=True, env=env,
                               capture_output=True, text=True).stdout.lower()
    assert "torch==" not in installed

    theory = subprocess.run([str(bin_dir / "attnphase"), "theory", "--alpha", "1", "--branch", "positional",
                             "--precision", "fast", "--json", "--quiet"],
                            env=env, cwd=tmp_path, capture_output=True, text=True)
    assert theory.returncode == 0, theory.stderr
    assert '"branch": "positional"' in theory.stdout

    sim = subprocess.run([str(bin_dir / "attnphase"), "simulate", "--d", "10", "--alpha", "1"],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert sim.returncode == 2
    lines = sim.stderr.strip().splitlines()
    assert len(lines) == 1 and "attnphase[experiments]" in lines[0], sim.stderr

    imports = subprocess.run([str(bin_dir / "python"), "-c",
                              "import sys, attnphase, attnphase.theory, attnphase.cli, attnphase.plots;"
                              "attnphase.cli.build_parser(); print('torch' in sys.modules)"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert imports.stdout.strip() == "False"


def test_library_and_cli_import_without_torch() -> None:
    """In any environment: importing the package, the theory and the CLI (parser included) never imports
    torch, which is what lets the light install work."""
    code = ("import sys, attnphase, attnphase.theory, attnphase.cli, attnphase.experiments.store, attnphase.reproduce;"
            "attnphase.cli.build_parser(); print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.stdout.strip() == "[]"
