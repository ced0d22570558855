"""The speed targets of the theory, as whole processes (import, compile cache, solve, print): seconds per command.

    python benchmarks/targets.py [--only NAME,...] [--skip-long] [--repeat 1] [--src DIR ...] [--timeout 1200]

Each command is what a user types (default precision of each command, this machine's cores); the table gives its
wall-clock seconds, the target and the ratio.  With --src DIR (repeatable) every command runs once per source tree
(PYTHONPATH=DIR/src, this interpreter), so an old and a new tree are timed in one run, side by side, with a column
of ratios (later tree / first tree).  An old tree can be made with `git worktree add /tmp/old <commit>`.
--skip-long leaves out the two commands whose targets are minutes (transition --rank 2, the L = 4 worked-example row).
The first run of a command after an install also compiles the kernels into numba's cache: run once to warm it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from attnphase.cli.common import format_table

HERE = Path(__file__).resolve().parent
ATTN = [sys.executable, "-m", "attnphase"]

# name -> (argv, target seconds, long)
TARGETS: dict[str, tuple[list[str], float, bool]] = {
    "study fixed point": (ATTN + ["theory", "--alpha", "1.5", "--branch", "semantic", "--quiet"], 1.5, False),
    # A study fixed point beyond the positional branch's end (at omega 0 it ends near alpha 0.93): the same target.
    "study point past a branch's end": (ATTN + ["theory", "--omega", "0", "--alpha", "1.5", "--branch", "positional",
                                                "--quiet"], 1.5, False),
    "study curve (20 alphas x 3 branches)": (ATTN + ["theory", "--alpha", "0.1:2:20", "--branch", "all", "--quiet"],
                                             10.0, False),
    "rank-2 global point": (ATTN + ["theory", "--rank", "2", "--alpha", "1.5", "--branch", "global", "--quiet"],
                            10.0, False),
    "transition --L 3": (ATTN + ["transition", "--L", "3", "--quiet"], 30.0, False),
    "transition --rank 2": (ATTN + ["transition", "--rank", "2", "--quiet"], 120.0, True),
    "L = 4 worked-example row": ([sys.executable, str(HERE / "worked_example.py"), "--L", "4"], 120.0, True),
}


def _run(argv: list[str], src: str | None, timeout: float) -> tuple[float, int]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(Path(src) / "src") + os.pathsep + env.get("PYTHONPATH", "")
    t = time.perf_counter()
    try:
        rc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    return time.perf_counter() - t, rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma list of target names (substrings)")
    ap.add_argument("--skip-long", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs per command; the table shows the fastest")
    ap.add_argument("--src", action="append", default=None, help="a source tree to time (repeatable)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds before a command is stopped (rc 124)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    trees = args.src or [None]
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    rows = []
    for name, (argv, target, long) in TARGETS.items():
        if (wanted and not any(w in name for w in wanted)) or (long and args.skip_long):
            continue
        row: dict = {"command": name, "target s": target}
        first = None
        for i, src in enumerate(trees):
            runs = [_run(argv, src, args.timeout) for _ in range(args.repeat)]
            sec = min(s for s, _ in runs)
            rc = max(r for _, r in runs)
            tag = "" if len(trees) == 1 else f" [{i}]"
            row[f"seconds{tag}"] = round(sec, 2)
            row[f"rc{tag}"] = rc
            if i == 0:
                first = sec
                row["vs target"] = round(sec / target, 2)
            else:
                row[f"ratio [{i}]/[0]"] = round(sec / first, 3)
        rows.append(row)
        print(f"{name}: {row}", flush=True)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    print()
    print(format_table(rows, cols))
    if len(trees) > 1:
        print("\n" + "\n".join(f"[{i}] {t}" for i, t in enumerate(trees)))
    print(f"\nload average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
