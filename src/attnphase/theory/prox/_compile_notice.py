"""One line on stderr while numba compiles a kernel: the first use of a kernel after an install (or an edit) compiles
it for tens of seconds with nothing else on screen, which a user takes for a hang.  Cache hits (every later run)
print nothing.  Silenced by ``--quiet`` (the CLI sets ATTNPHASE_QUIET, which pool workers inherit)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

QUIET_ENV = "ATTNPHASE_QUIET"
_said: set[str] = set()


@contextmanager
def compile_notice(what: str, dispatchers: tuple, seconds: str) -> Iterator[None]:
    """Around a call of numba `dispatchers`: if one of them is compiled (a cache miss), say once per process on
    stderr that `what` is being compiled (first use, about `seconds`; cached afterwards)."""
    if what in _said or all(d.signatures for d in dispatchers):
        yield
        return
    from numba.core import event

    class _Say(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            if what in _said or ev.data["dispatcher"] not in dispatchers:
                return
            _said.add(what)
            if not os.environ.get(QUIET_ENV):
                print(f"attnphase: compiling {what} (first use, about {seconds} on 2 cores; cached afterwards)",
                      file=sys.stderr, flush=True)

        def on_end(self, ev: event.Event) -> None:
            pass

    with event.install_listener("numba:compile", _Say()):
        yield
