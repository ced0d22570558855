"""First use after an install: compiled kernels say that they compile, and the Sobol points are kept on disk
bitwise (theory/model/quadrature.py)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from attnphase.theory.model import quadrature
from attnphase.theory.prox import _compile_notice


@pytest.fixture
def fresh_sobol(tmp_path, monkeypatch):
    monkeypatch.setenv(quadrature.CACHE_ENV, str(tmp_path))
    quadrature._gaussian_sobol.cache_clear()
    yield tmp_path
    quadrature._gaussian_sobol.cache_clear()


def test_cached_sobol_points_equal_a_fresh_draw_bitwise(fresh_sobol, monkeypatch):
    first = quadrature.gaussian_sobol(7, 4, 11)
    (path,) = fresh_sobol.glob("sobol-gauss-7-4-11-*.npy")
    direct = quadrature._draw_gaussian_sobol(7, 4, 11).T  # scipy's draw, bypassing every cache
    assert np.array_equal(first, direct)

    # Read back from the disk (that it is not drawn again is held in a fresh process by
    # test_import_cost.test_sobol_points_from_a_warm_cache_need_no_scipy_stats: no scipy.stats is loaded).
    quadrature._gaussian_sobol.cache_clear()
    again = quadrature.gaussian_sobol(7, 4, 11)
    assert np.array_equal(again, direct) and not again.flags.writeable
    assert again.shape == (4, 128) and np.all(np.isfinite(again))

    # A damaged file (wrong shape, truncated) is drawn again, never used.
    monkeypatch.undo()
    monkeypatch.setenv(quadrature.CACHE_ENV, str(fresh_sobol))
    np.save(path, np.zeros((3, 3)))
    quadrature._gaussian_sobol.cache_clear()
    assert np.array_equal(quadrature.gaussian_sobol(7, 4, 11), direct)
    path.write_bytes(b"\x93NUMPY garbage")
    quadrature._gaussian_sobol.cache_clear()
    assert np.array_equal(quadrature.gaussian_sobol(7, 4, 11), direct)


def test_sobol_disk_cache_can_be_turned_off_and_survives_an_unwritable_place(tmp_path, monkeypatch):
    monkeypatch.setenv(quadrature.CACHE_ENV, "")
    assert quadrature.cache_dir() is None
    quadrature._gaussian_sobol.cache_clear()
    z = quadrature.gaussian_sobol(5, 2, 0)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(quadrature.CACHE_ENV, str(blocker / "sub"))
    quadrature._gaussian_sobol.cache_clear()
    assert np.array_equal(quadrature.gaussian_sobol(5, 2, 0), z)
    quadrature._gaussian_sobol.cache_clear()


def test_a_compiling_kernel_says_so_once_and_a_compiled_one_is_silent(capsys, monkeypatch):
    monkeypatch.delenv(_compile_notice.QUIET_ENV, raising=False)
    monkeypatch.setattr(_compile_notice, "_said", set())

    @numba.njit(cache=False)
    def double(x):  # noqa: ANN001, ANN202
        return 2 * x

    @numba.njit(cache=False)
    def other(x):  # noqa: ANN001, ANN202
        return x + 1

    with _compile_notice.compile_notice("the doubling kernel", (double,), "1 s"):
        other(1)  # another function's compilation says nothing
    assert capsys.readouterr().err == ""
    with _compile_notice.compile_notice("the doubling kernel", (double,), "1 s"):
        assert double(2) == 4
    err = capsys.readouterr().err
    assert err.count("compiling the doubling kernel") == 1 and "cached afterwards" in err
    with _compile_notice.compile_notice("the doubling kernel", (double,), "1 s"):
        double(2.5)  # a new specialisation of a kernel already announced: once per process
    assert capsys.readouterr().err == ""


def test_quiet_silences_the_compile_notice(capsys, monkeypatch):
    monkeypatch.setenv(_compile_notice.QUIET_ENV, "1")
    monkeypatch.setattr(_compile_notice, "_said", set())

    @numba.njit(cache=False)
    def triple(x):  # noqa: ANN001, ANN202
        return 3 * x

    with _compile_notice.compile_notice("the tripling kernel", (triple,), "1 s"):
        assert triple(1) == 3
    assert capsys.readouterr().err == ""
