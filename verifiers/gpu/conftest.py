"""The compiled-code checks skip, with one line saying what is missing, where Triton or the CUDA
disassemblers cannot be installed; everything else here needs neither."""

import pytest

from impls.gpu.compiled import compile_many, missing


@pytest.fixture(scope="session")
def compiler():
    """``compile_many`` when the tools are here (PTX, cubin and SASS); otherwise the test skips."""
    why = missing(sass=True)
    if why:
        pytest.skip(why)
    return compile_many
