"""One gloo launch (4 CPU ranks) for every parallelism verifier in a pytest session.

``gloo_parallel[topic][key]`` is the list of per-rank records of that probe run (ordered by
global rank); a probe that raised on any rank fails the tests that use it, with its traceback.
``launch`` tears the ranks down on failure and gives up after the timeout, so nothing hangs.
"""

from __future__ import annotations

import pytest

from impls.distributed.probes import launch
from impls.parallel.probes import probe_all

LAUNCH_TIMEOUT = 420  # seconds; generous: 4 ranks share 2 cores with other work


@pytest.fixture(scope="session")
def gloo_parallel() -> dict[str, dict[str, list[dict]]]:
    res = launch(probe_all, 4, timeout=LAUNCH_TIMEOUT)
    out: dict[str, dict[str, list[dict]]] = {}
    for topic in res[0]:
        per_rank = [r[topic] for r in res]
        if any("error" in p for p in per_rank):
            out[topic] = {"error": [next(p["error"] for p in per_rank if "error" in p)]}
            continue
        out[topic] = {key: [p[key] for p in per_rank] for key in per_rank[0]}
    return out
