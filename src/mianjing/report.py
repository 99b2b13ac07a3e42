"""The one report format: ``build/verification.json``.

```
{"format": 1, "created": ISO-8601, "inputs_digest": sha256,
 "environment": {python, platform, torch, device, cuda, hypothesis, date, commit, dirty},
 "incremental": {"rerun": n, "reused": n, "reuse": bool},
 "claims": {claim_id: {"outcome": passed|failed|skipped|not-run, "duration": s,
                       "inputs_digest": sha256, "key": sha256, "evidence": {...},
                       "run": {"status": rerun|reused, "commit", "dirty", "date"},
                       "environment": {... of the run that executed it},
                       "tests": [{nodeid, file, line, function, outcome, duration, message, evidence}]}},
 "summary": {"passed": n, "failed": n, "skipped": n}}
```
``key`` hashes what the claim's outcome depends on (see ``mianjing.verify``); ``run`` says whether
this report ran its verifiers (``rerun``) or carried the result of an earlier run whose key is the
same (``reused``), and the commit that run verified. A claim's result is *stale* when its
``inputs_digest`` differs from the digest of the code now on disk (``impls/``, ``verifiers/`` and
the claims' verdicts; every record a run writes or carries over gets the digest of that moment),
so the site never shows an old green as current.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = 1
OUTCOMES = ("passed", "failed", "skipped", "not-run")


def inputs_digest(root: Path) -> str:
    """sha256 over the verifier and implementation sources and the claims' ids, verdicts, methods."""
    h = hashlib.sha256()
    for folder in ("impls", "verifiers"):
        base = root / folder
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*.py")):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    from .loader import load  # local: the plugin imports this module inside pytest

    kb = load(root).kb
    for entry, claim in kb.claims():
        h.update(f"{entry.id}|{claim.id}|{claim.verdict.value}|{claim.method.value}\n".encode())
    return h.hexdigest()


def to_jsonable(value, depth: int = 0):
    """Evidence may hold tensors, numpy values, sympy objects: make them JSON."""
    if depth > 8:
        return str(value)
    # exact builtin types out: numpy.float64 is a float subclass that xdist cannot send
    if value is None:
        return None
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v, depth + 1) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "shape"):  # torch / numpy arrays
        try:
            numel = int(math.prod(value.shape))
        except TypeError:
            numel = 0
        if numel <= 256:
            return to_jsonable(value.tolist(), depth + 1)
        return f"<array shape={tuple(value.shape)}>"
    if hasattr(value, "item"):
        try:
            return to_jsonable(value.item(), depth + 1)
        except (TypeError, ValueError, RuntimeError):
            pass
    return str(value)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class ReportError(ValueError):
    pass


@dataclass
class Report:
    data: dict = field(default_factory=dict)

    @property
    def claims(self) -> dict[str, dict]:
        return self.data.get("claims", {})

    @property
    def environment(self) -> dict:
        return self.data.get("environment", {})

    def outcome(self, claim_id: str, current_digest: str | None = None) -> str:
        """passed | failed | skipped | not-run | stale."""
        rec = self.claims.get(claim_id)
        if rec is None:
            return "not-run"
        if current_digest is not None and rec.get("inputs_digest") != current_digest:
            return "stale"
        return rec.get("outcome", "not-run")


def load_report(path: Path) -> Report | None:
    """The report, None if absent; ReportError (one line) if unreadable."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: not a readable verification report ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("claims"), dict):
        raise ReportError(f"{path}: not a verification report of format {FORMAT}; run `mianjing verify`")
    return Report(data)


def summarise(claims: dict[str, dict]) -> dict[str, int]:
    out = {k: 0 for k in OUTCOMES}
    for rec in claims.values():
        out[rec.get("outcome", "not-run")] = out.get(rec.get("outcome", "not-run"), 0) + 1
    return out
