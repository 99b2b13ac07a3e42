"""An autouse fixture for verifier folders whose tests run thousands of tiny tensor ops (block loops,
token-by-token simulations): intra-op threads cost far more than they gain there on a shared CPU, so
each test runs on one thread. A folder opts in by importing it into its conftest.py."""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
