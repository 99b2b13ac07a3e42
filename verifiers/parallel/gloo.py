"""Reading the records of the shared gloo launch (see ``conftest.py``)."""

from __future__ import annotations


def records(gloo_parallel: dict, topic: str, key: str) -> list[dict]:
    """The per-rank records of one probe run; fails with the probe's traceback if it raised."""
    assert topic in gloo_parallel, f"the shared launch did not run the {topic!r} probes"
    runs = gloo_parallel[topic]
    assert "error" not in runs, runs.get("error", [""])[0]
    recs = runs[key]
    errors = [r["error"] for r in recs if "error" in r]
    assert not errors, errors[0]
    return recs


class Topic:
    """``Topic(gloo_parallel, "context")[key]``: the per-rank records of one run of that probe."""

    def __init__(self, shared: dict, topic: str):
        self.shared, self.topic = shared, topic

    def __getitem__(self, key: str) -> list[dict]:
        return records(self.shared, self.topic, key)
