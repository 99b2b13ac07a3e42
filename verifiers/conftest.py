"""Settings shared by every verifier: a derandomised hypothesis profile, fixed seeds, Triton's CPU interpreter.

The ``claim`` marker and the ``evidence`` / ``device`` fixtures come from
``mianjing.plugin`` (loaded by ``addopts`` in pyproject.toml).
"""

import os

from hypothesis import HealthCheck, settings

from mianjing.plugin import selected_device

# Triton kernels on the CPU device run in Triton's interpreter; it must be chosen before any kernel
# module is imported (``@triton.jit`` decides at decoration time).
if selected_device() == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

settings.register_profile(
    "verify",
    max_examples=int(os.environ.get("MIANJING_MAX_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("MIANJING_HYPOTHESIS_PROFILE", "verify"))
