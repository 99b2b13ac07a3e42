"""Settings shared by every verifier: a derandomised hypothesis profile, fixed seeds, Triton's CPU interpreter.

The ``claim`` marker and the ``evidence`` / ``device`` fixtures come from
``mianjing.plugin`` (loaded by ``addopts`` in pyproject.toml).
"""

import os

from hypothesis import HealthCheck, Phase, settings

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
# Fault-injection runs (tests/test_injected_bugs_*.py) only need to see a verifier fail, not a shrunk
# counterexample: shrinking an interpreted Triton kernel's failure costs minutes.
settings.register_profile(
    "faults",
    parent=settings.get_profile("verify"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.load_profile(os.environ.get("MIANJING_HYPOTHESIS_PROFILE", "verify"))
