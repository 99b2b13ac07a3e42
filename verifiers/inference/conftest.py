"""These verifiers run thousands of tiny tensor ops (block loops, token-by-token simulations), for which
intra-op threads cost far more than they gain on a shared CPU: run each test on one thread."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
