"""Settings shared by every verifier: a derandomised hypothesis profile, fixed seeds.

The ``claim`` marker and the ``evidence`` / ``device`` fixtures come from
``mianjing.plugin`` (loaded by ``addopts`` in pyproject.toml).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "verify",
    max_examples=int(os.environ.get("MIANJING_MAX_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("MIANJING_HYPOTHESIS_PROFILE", "verify"))
