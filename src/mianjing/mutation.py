"""``mianjing mutants``: the project's own fault-injection suite.

A mutant is one small, realistic bug in the reference code: ``(file, exact original snippet,
replacement)``. Each mutant is applied alone to a scratch copy of the checkout (the working tree
is never touched), and only the test files that import the changed module, directly or through
other project modules, are run there (``verifiers/`` for ``impls/``; ``tests/`` for the tool in
``src/``), stopping at the first failure:

* **killed**: a test failed (or the mutated code could not even be collected, or it hung past the
  time limit) -- the verifiers see the bug;
* **survived**: every selected test passed -- a hole, unless the mutant is marked ``equivalent``
  with the reason no test can tell it from the original;
* **stale**: the original snippet no longer occurs exactly once in the file, so the mutant cannot
  be applied (the code moved on; update or drop the mutant). Stale mutants are reported, never
  silently skipped.

Mutants live in ``mutants/<area>.py`` as a list ``MUTANTS`` of :class:`Mutant`; adding one is
one line. The report (``build/mutants.json``) gives killed / survived / equivalent / stale per
module and per area (each ``impls/<area>`` folder, and ``tool`` for ``src/``), each with its score
``killed / (all - equivalent - stale)``, and the overall score.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .imports import closure, import_graph, module_name
from .report import write_json_atomic

NAME = re.compile(r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$")


@dataclass(frozen=True)
class Mutant:
    """One bug: replace the only occurrence of ``old`` in ``file`` by ``new``.

    ``equivalent``: why no test can distinguish it from the original (it then counts neither as
    killed nor as survived). ``why``: the mistake it imitates, when the name does not say it.
    """

    name: str
    file: str  # relative to the repository root, e.g. impls/rl/trpo.py
    old: str
    new: str
    why: str = ""
    equivalent: str | None = None


@dataclass
class Outcome:
    name: str
    file: str
    status: str  # killed | survived | equivalent | stale | timeout | error
    detail: str = ""  # the test that killed it, why it is stale, ...
    seconds: float = 0.0
    tests: list[str] = field(default_factory=list)  # the test files selected


# ------------------------------------------------------------------------------ loading
class MutantFileError(ValueError):
    pass


def load_mutants(root: Path) -> list[Mutant]:
    """Every ``MUTANTS`` list in ``mutants/*.py``, in file order; names must be unique."""
    out: list[Mutant] = []
    seen: dict[str, str] = {}
    for path in sorted((root / "mutants").glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"_mianjing_mutants_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # a broken list must say where, not traceback
            raise MutantFileError(f"{path.relative_to(root)}: cannot load: {exc}") from None
        for m in getattr(module, "MUTANTS", []):
            where = f"{path.relative_to(root)}: mutant {getattr(m, 'name', m)!r}"
            if not isinstance(m, Mutant):
                raise MutantFileError(f"{where}: not a Mutant")
            if not NAME.match(m.name):
                raise MutantFileError(f"{where}: name must be lower-case words joined by '.' or '-'")
            if m.name in seen:
                raise MutantFileError(f"{where}: name also used in {seen[m.name]}")
            if m.old == m.new:
                raise MutantFileError(f"{where}: replacement equals the original")
            seen[m.name] = str(path.relative_to(root))
            out.append(m)
    return out


def stale_reason(root: Path, m: Mutant) -> str | None:
    """Why ``m`` cannot be applied to the checkout at ``root`` (None when it applies cleanly)."""
    path = root / m.file
    if not path.is_file():
        return f"no such file: {m.file}"
    text = path.read_text(encoding="utf-8")
    n = text.count(m.old)
    if n == 0:
        return "the original snippet is no longer in the file"
    if n > 1:
        return f"the original snippet occurs {n} times (make it longer so it is unique)"
    try:
        compile(text.replace(m.old, m.new), m.file, "exec")
    except SyntaxError as exc:
        return f"the mutated file does not parse: {exc.msg} (line {exc.lineno})"
    return None


# ------------------------------------------------------------------- which tests import it
def test_file_seconds(root: Path) -> dict[str, float]:
    """Seconds each verifier file took in the last ``mianjing verify`` (build/verification.json), if any."""
    import json

    try:
        report = json.loads((root / "build" / "verification.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    seconds: dict[str, float] = {}
    seen: set[str] = set()
    for rec in report.get("claims", {}).values():
        for t in rec.get("tests", []):
            if t.get("nodeid") in seen or not t.get("file"):
                continue
            seen.add(t["nodeid"])
            seconds[t["file"]] = seconds.get(t["file"], 0.0) + float(t.get("duration") or 0.0)
    return seconds


def selected_tests(root: Path, rel_file: str, graph: dict[str, set[str]] | None = None,
                    seconds: dict[str, float] | None = None) -> list[str]:
    """Test files that import the module in ``rel_file`` directly or transitively: ``verifiers/`` for
    code under ``impls/``, ``tests/`` for the tool. Cheapest first (by the last verify's durations,
    when known), so that ``-x`` usually stops before the slow ones."""
    graph = graph if graph is not None else import_graph(root)
    target = module_name(rel_file)
    folder = "verifiers" if rel_file.startswith("impls/") else "tests"
    direct, indirect = [], []
    for name in sorted(graph):
        rel = name.replace(".", "/") + ".py"
        if not (rel.startswith(folder + "/") and Path(rel).name.startswith("test_")):
            continue
        if target in graph[name]:
            direct.append(rel)
        elif target in closure(graph, graph[name]):
            indirect.append(rel)
    found = direct + indirect
    if seconds:
        known = [seconds[f] for f in found if f in seconds]
        typical = sorted(known)[len(known) // 2] if known else 0.0
        found.sort(key=lambda f: seconds.get(f, typical))
    return found


# ---------------------------------------------------------------------------- running
def _checkout_files(root: Path) -> list[str]:
    """The working tree as git sees it: tracked files plus untracked ones git does not ignore."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root,
                             capture_output=True, text=True, timeout=60, check=True).stdout
        return [f for f in out.split("\0") if f and (root / f).is_file()]
    except (OSError, subprocess.SubprocessError):
        skip = {".git", ".venv", "build", "site", "__pycache__", ".hypothesis"}
        return [p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(root).parts)]


def make_scratch(root: Path, into: Path) -> Path:
    for rel in _checkout_files(root):
        dst = into / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dst)
    return into


_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)", re.M)


def memory_cap(jobs: int) -> int:
    """Address space each mutant's tests may use: max(4 GiB, physical memory / (jobs + 1))."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30
    return max(4 << 30, total // (jobs + 1))


def _limit_memory(limit: int):
    def apply() -> None:  # in the child, before pytest starts
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_one(scratch: Path, m: Mutant, tests: list[str], timeout: float, max_examples: int,
            memory: int | None = None) -> Outcome:
    """Apply ``m`` in ``scratch``, run ``tests`` there until the first failure, restore the file.

    ``memory`` (bytes) caps the tests' address space: a mutant that makes the code allocate without end
    (lc.buildtree.right-preorder-offset grows its work stack forever) fails its test with MemoryError, a
    kill, instead of growing until the kernel's OOM killer ends it, or something else on the machine."""
    out = Outcome(m.name, m.file, "survived", tests=tests)
    if not tests:
        out.detail = "no test file imports this module"
        return out if m.equivalent is None else Outcome(m.name, m.file, "equivalent", m.equivalent, tests=tests)
    path = scratch / m.file
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace(m.old, m.new, 1), encoding="utf-8")
    env = dict(os.environ, MIANJING_DEVICE="cpu", MIANJING_MAX_EXAMPLES=str(max_examples), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(scratch / "src"), str(scratch)]), PYTHONDONTWRITEBYTECODE="1")
    env.pop("MIANJING_ROOT", None)
    cmd = [sys.executable, "-m", "pytest", *tests, "-x", "-q", "-p", "no:cacheprovider", "-rfE",
           "--no-header", "--tb=line", f"--timeout={int(timeout)}"]
    started = time.time()
    try:
        proc = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout + 60,
                              preexec_fn=_limit_memory(memory) if memory else None)
        code, text = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        code, text = -1, ""
    finally:
        path.write_text(original, encoding="utf-8")
    out.seconds = round(time.time() - started, 1)
    hit = _FAILED.search(text)
    if code == -1 or "Timeout" in text and code != 0:
        # not a kill: on a loaded machine the unmutated tests can take as long; rerun it alone with more time
        out.status = "timeout"
        out.detail = f"its tests did not finish in {int(timeout)} s: rerun it alone with a larger --timeout"
    elif code == 0:
        if m.equivalent is not None:
            out.status, out.detail = "equivalent", m.equivalent
    elif code in (1, 2):
        out.status = "killed"
        out.detail = hit.group(2) if hit else ("collection failed" if code == 2 else "a test failed")
    else:
        out.status = "error"
        out.detail = f"pytest exited with status {code}: " + " ".join(text.strip().splitlines()[-3:])[:300]
    if m.equivalent is not None and out.status == "killed":
        out.detail = f"declared equivalent, but {out.detail} kills it: drop the equivalence note"
        out.status = "error"
    return out


STATUSES = ("killed", "survived", "equivalent", "stale", "timeout", "error")


def area_of(rel_file: str) -> str:
    """``impls/<area>`` for reference code (``impls/rl/ppo.py`` -> ``impls/rl``), ``tool`` for ``src/``."""
    parts = rel_file.split("/")
    return "/".join(parts[:2]) if parts[0] == "impls" and len(parts) > 2 else "tool" if parts[0] == "src" else parts[0]


def scored(row: dict[str, int]) -> int:
    """Mutants that count in the score: all but the equivalent and the stale (a time-out is not a kill)."""
    return row["killed"] + row["survived"] + row["timeout"] + row["error"]


def _score(row: dict[str, int]) -> float | None:
    n = scored(row)
    return row["killed"] / n if n else None


@dataclass
class Report:
    outcomes: list[Outcome]
    wall: float
    jobs: int

    def _rows(self, key) -> dict[str, dict[str, int]]:
        rows: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            row = rows.setdefault(key(o.file), dict.fromkeys(STATUSES, 0))
            row[o.status] += 1
        return dict(sorted(rows.items()))

    def by_module(self) -> dict[str, dict[str, int]]:
        return self._rows(lambda f: f)

    def by_area(self) -> dict[str, dict]:
        """Per area (``impls/<area>``, ``tool``): the counts and the area's score (None if nothing was scored)."""
        return {area: {**row, "score": _score(row)} for area, row in self._rows(area_of).items()}

    @property
    def counts(self) -> dict[str, int]:
        c = dict.fromkeys(STATUSES, 0)
        for o in self.outcomes:
            c[o.status] += 1
        return c

    @property
    def score(self) -> float | None:
        return _score(self.counts)

    @property
    def ok(self) -> bool:
        c = self.counts
        return c["survived"] == c["stale"] == c["timeout"] == c["error"] == 0

    def to_json(self) -> dict:
        return {"format": 1, "wall_seconds": round(self.wall, 1), "jobs": self.jobs, "counts": self.counts,
                "score": self.score, "by_area": self.by_area(), "by_module": self.by_module(),
                "mutants": [asdict(o) for o in self.outcomes]}


def run_all(root: Path, mutants: list[Mutant], jobs: int = 2, timeout: float = 300, max_examples: int = 30,
            on_done=None) -> Report:
    """Run every mutant (stale ones are reported, not run) on ``jobs`` scratch copies in parallel."""
    started = time.time()
    memory = memory_cap(jobs)
    graph, seconds = import_graph(root), test_file_seconds(root)
    outcomes: dict[str, Outcome] = {}
    todo: list[tuple[Mutant, list[str]]] = []
    for m in mutants:
        why = stale_reason(root, m)
        if why is not None:
            outcomes[m.name] = Outcome(m.name, m.file, "stale", why)
            if on_done:
                on_done(outcomes[m.name])
        else:
            todo.append((m, selected_tests(root, m.file, graph, seconds)))
    # the most expensive first, so the workers finish together
    todo.sort(key=lambda mt: -sum(seconds.get(f, 1.0) for f in mt[1]))
    with tempfile.TemporaryDirectory(prefix="mianjing-mutants-") as tmp:
        pool = [make_scratch(root, Path(tmp) / f"w{i}") for i in range(max(1, jobs))]
        free = list(pool)
        lock = threading.Lock()

        def work(item: tuple[Mutant, list[str]]) -> Outcome:
            with lock:
                scratch = free.pop()
            try:
                res = run_one(scratch, item[0], item[1], timeout, max_examples, memory=memory)
            finally:
                with lock:
                    free.append(scratch)
            if on_done:
                on_done(res)
            return res

        with ThreadPoolExecutor(max_workers=len(pool)) as ex:
            for res in ex.map(work, todo):
                outcomes[res.name] = res
    ordered = [outcomes[m.name] for m in mutants]
    return Report(ordered, time.time() - started, jobs)


def write_report(root: Path, report: Report) -> Path:
    path = root / "build" / "mutants.json"
    write_json_atomic(path, report.to_json())
    return path


# ------------------------------------------------------------------------------ the command
def command(root: Path, names: list[str] | None, jobs: int, timeout: float, max_examples: int,
            list_only: bool, console, err) -> int:
    """``mianjing mutants``: returns the exit status (0 all killed or equivalent, 1 otherwise, 2 bad input)."""
    from rich.table import Table

    try:
        mutants = load_mutants(root)
    except MutantFileError as exc:
        err.print(f"error: {exc}", markup=False)
        return 2
    if names:
        chosen = [m for m in mutants if any(m.name == n or m.name.startswith(n + ".") or m.file == n for n in names)]
        unknown = [n for n in names if not any(m.name == n or m.name.startswith(n + ".") or m.file == n
                                               for m in mutants)]
        if unknown:
            err.print(f"error: no mutant, name prefix or file: {', '.join(unknown)}", markup=False)
            return 2
        mutants = chosen
    if list_only:
        graph, seconds = import_graph(root), test_file_seconds(root)
        for m in mutants:
            why = stale_reason(root, m)
            tests = selected_tests(root, m.file, graph, seconds)
            state = f"STALE ({why})" if why else f"{len(tests)} test files"
            console.print(f"{m.name}  {m.file}  {state}", markup=False, highlight=False, soft_wrap=True)
        return 0

    def done(o: Outcome) -> None:
        if o.status in ("survived", "stale", "timeout", "error"):
            console.print(f"{o.status.upper()} {o.name} ({o.file}): {o.detail}", markup=False, highlight=False, soft_wrap=True)

    report = run_all(root, mutants, jobs=jobs, timeout=timeout, max_examples=max_examples, on_done=done)
    path = write_report(root, report)
    table = Table(title=f"mutants ({report.wall / 60:.1f} min, {jobs} jobs)")
    for col in ("module", *STATUSES):
        table.add_column(col, justify="left" if col == "module" else "right", no_wrap=col == "module")
    for mod, row in report.by_module().items():
        table.add_row(mod, *(str(row[k]) for k in STATUSES))
    c = report.counts
    table.add_row("all", *(str(c[k]) for k in STATUSES))
    console.print(table)
    areas = Table(title="score per area (killed / scored; equivalent and stale not scored, a time-out is no kill)")
    for col in ("area", "killed", "scored", "score", "equivalent", "stale", "timeout"):
        areas.add_column(col, justify="left" if col == "area" else "right", no_wrap=True)
    for area, row in report.by_area().items():
        areas.add_row(area, str(row["killed"]), str(scored(row)),
                      "-" if row["score"] is None else f"{100 * row['score']:.1f}%",
                      str(row["equivalent"]), str(row["stale"]), str(row["timeout"]))
    console.print(areas)
    console.print("per area: " + ", ".join(f"{a} {r['killed']}/{scored(r)}" for a, r in report.by_area().items()),
                  markup=False, highlight=False)
    score = report.score
    console.print(f"score: {c['killed']}/{scored(c)} killed"
                  + (f" ({100 * score:.1f}%)" if score is not None else "")
                  + f", {c['equivalent']} judged equivalent, {c['stale']} stale, {c['timeout']} timed out; "
                  f"report: {path.relative_to(root)}", markup=False, highlight=False)
    return 0 if report.ok else 1
