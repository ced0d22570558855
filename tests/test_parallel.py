"""The package's one process pool: worker validation, order of results, one thread per worker."""

from __future__ import annotations

import pytest

from attnphase.parallel import check_workers, map_tasks


def _square(x: int) -> int:
    return x * x


def _threads(_: int) -> tuple[int, int]:
    import numba
    from threadpoolctl import threadpool_info

    blas = max((p["num_threads"] for p in threadpool_info()), default=1)
    return blas, numba.get_num_threads()


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                      ("2", TypeError)])
def test_check_workers_refuses(bad, exc) -> None:
    with pytest.raises(exc):
        check_workers(bad)
    with pytest.raises(exc):
        map_tasks(_square, [1, 2], workers=bad)


def test_map_tasks_keeps_order_serial_and_pooled() -> None:
    assert map_tasks(_square, range(5)) == [0, 1, 4, 9, 16]
    assert map_tasks(_square, range(5), workers=2) == [0, 1, 4, 9, 16]
    assert map_tasks(_square, []) == []


def test_workers_are_single_threaded() -> None:
    for blas, nb in map_tasks(_threads, range(2), workers=2):
        assert blas == 1 and nb == 1
