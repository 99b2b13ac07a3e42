"""One gloo launch (4 CPU ranks) for the parallelism verifiers of a pytest session.

``gloo_parallel`` runs, in one process group, the probes of every topic whose verifier module
was collected (so ``mianjing verify tp.four-allreduces-per-layer`` spawns the ranks once and only
for tensor parallelism). ``Topic(gloo_parallel, topic)[key]`` (``gloo.py``) reads the per-rank
records of one probe run; a probe that raised fails the tests that use it, with its traceback.
``launch`` tears the ranks down on failure and gives up after the timeout, so nothing hangs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from impls.distributed.probes import launch
from impls.parallel.probes import PROBES, probe_all

LAUNCH_TIMEOUT = 420  # seconds; generous: 4 ranks share 2 cores with other work
MODULE_TOPIC = {"test_tensor_parallel.py": "tensor", "test_pipeline.py": "pipeline",
                "test_context_parallel.py": "context", "test_expert_parallel.py": "experts",
                "test_collectives.py": "collectives", "test_planner.py": ("tensor", "pipeline")}


def _topics(session: pytest.Session) -> tuple[str, ...]:
    wanted: set[str] = set()
    for item in session.items:
        if "gloo_parallel" in getattr(item, "fixturenames", ()):
            topic = MODULE_TOPIC.get(Path(str(item.fspath)).name, ())
            wanted.update((topic,) if isinstance(topic, str) else topic)
    return tuple(t for t in PROBES if t in wanted) or tuple(PROBES)


@pytest.fixture(scope="session")
def gloo_parallel(request: pytest.FixtureRequest) -> dict[str, dict[str, list[dict]]]:
    res = launch(probe_all, 4, _topics(request.session), timeout=LAUNCH_TIMEOUT)
    out: dict[str, dict[str, list[dict]]] = {}
    for topic in res[0]:
        per_rank = [r[topic] for r in res]
        if any("error" in p for p in per_rank):
            out[topic] = {"error": [next(p["error"] for p in per_rank if "error" in p)]}
            continue
        out[topic] = {key: [p[key] for p in per_rank] for key in per_rank[0]}
    return out
