"""What this machine has: the memory available to a run, read before anything is allocated.

Shared by the theory's size checks (theory.cost, GAMP) and the simulations' memory guard
(experiments.simulation.memory), so that neither side imports the other.
"""

from __future__ import annotations

import os

# Fraction of the available memory a run may plan to use (the rest covers the interpreter, torch itself and
# allocator slack).
USABLE_FRACTION = 0.8


def available_host_memory() -> int:
    """MemAvailable from /proc/meminfo (Linux), else physical memory from sysconf, else a large number."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62
