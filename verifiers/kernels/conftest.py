"""Kernel verifiers: one thread per test (interpreted kernels are thousands of tiny ops), and the compiled-code
checks skip with one line where Triton or the CUDA disassemblers cannot be installed."""

import pytest

from verifiers.one_thread import one_thread  # noqa: F401 -- an autouse fixture, active in this folder


@pytest.fixture(scope="session")
def built():
    """Every request of verifiers/kernels/builds.py compiled (one child process, cached in build/cache/compiled)."""
    from impls.gpu.compiled import compile_many, missing
    from verifiers.kernels.builds import REQUESTS

    why = missing(sass=True)
    if why:
        pytest.skip(why)
    return dict(zip(REQUESTS, compile_many(list(REQUESTS.values()))))
