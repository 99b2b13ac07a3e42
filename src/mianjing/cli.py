"""The ``mianjing`` command line.

Heavy modules (torch, hypothesis, mkdocs) are imported inside the commands
that need them, never at start-up: ``mianjing quiz`` must start fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="mianjing (面经): LLM / AI-infra interview questions, every claim checked by code.")
console = Console()
err = Console(stderr=True)


def _root() -> Path:
    from .paths import RootNotFound, repo_root

    try:
        return repo_root()
    except RootNotFound as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


@app.command()
def check(
    catalog: Annotated[Optional[Path], typer.Option(help="the catalog file (default ../shared/catalog/claims.yaml)")] = None,
) -> None:
    """Validate every qa/**/*.yaml and the cross references; list every problem as path:line: field: message."""
    from .check import check as run_check

    root = _root()
    res = run_check(root, catalog)
    for w in res.warnings:
        err.print(f"warning: {w}", markup=False, highlight=False, soft_wrap=True)
    for p in res.problems:
        console.print(str(p), markup=False, highlight=False, soft_wrap=True)
    n_claims = sum(1 for _ in res.kb.claims())
    settled = sum(1 for _, c in res.kb.claims() if c.catalog)
    run, factual = res.executable_share
    summary = (f"{len(res.kb)} entries, {n_claims} claims ({settled} settle catalog claims), "
               f"{len(res.markers)} verifier markers; {run}/{factual} non-opinion claims executable "
               f"({100 * run / max(factual, 1):.1f}%), {len(res.citation_only_refuted)} refuted by citation only")
    if res.problems:
        console.print(f"{len(res.problems)} problem(s); {summary}", markup=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print(f"ok: {summary}", markup=False, soft_wrap=True)


@app.command()
def schema() -> None:
    """Export the entry JSON Schema to qa/schema.json (editors autocomplete from it)."""
    from .schema import json_schema

    root = _root()
    path = root / "qa" / "schema.json"
    path.write_text(json.dumps(json_schema(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {path.relative_to(root)}", markup=False)


@app.command()
def verify(
    ids: Annotated[Optional[list[str]], typer.Argument(help="claim or entry ids (default: all)")] = None,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda")] = "auto",
    jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="parallel pytest workers")] = 1,
    timeout: Annotated[int, typer.Option(help="seconds before a hanging verifier is stopped")] = 300,
    all_: Annotated[bool, typer.Option("--all", help="rerun every selected claim, reusing no earlier result")] = False,
) -> None:
    """Run the verifiers and write build/verification.json; exit 1 if any claim fails.

    A claim whose verifier files, the project modules they import, its text, the library versions,
    the device and the settings are unchanged since it last passed is reused, not rerun (--all reruns it)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from .loader import load
    from .verify import run

    if device not in ("auto", "cpu", "cuda"):
        err.print(f"[red]error:[/red] --device must be auto, cpu or cuda, not {device!r}")
        raise typer.Exit(2)
    root = _root()
    loaded = load(root)
    if loaded.problems:
        for p in loaded.problems:
            err.print(str(p), markup=False, highlight=False)
        err.print("[red]fix the knowledge base first (mianjing check)[/red]")
        raise typer.Exit(2)
    kb = loaded.kb
    chosen = None
    if ids:
        chosen, unknown = kb.select(ids)
        if unknown:
            err.print(f"[red]error:[/red] no claim or entry with id: {', '.join(unknown)}")
            raise typer.Exit(2)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("verifying", total=None)

        def on_progress(outcome: str, nodeid: str) -> None:
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome == "failed":
                console.print(f"FAILED {nodeid}", markup=False, style="red")
            progress.update(task, description=f"{sum(counts.values())} tests: {counts['passed']} passed, "
                                              f"{counts['failed']} failed, {counts['skipped']} skipped  {nodeid}")

        res = run(root, kb, chosen, device=device, jobs=jobs, timeout=timeout, on_progress=on_progress,
                  reuse=not all_)

    outcomes: dict[str, int] = {}
    needs_cuda = 0
    for rec in res.claims.values():
        outcomes[rec["outcome"]] = outcomes.get(rec["outcome"], 0) + 1
        if rec["outcome"] == "skipped" and all("CUDA" in (t.get("message") or "") for t in rec.get("tests", [])):
            needs_cuda += 1
    table = Table(title=f"verification ({res.wall:.1f} s, device {res.report['environment'].get('device')})")
    table.add_column("outcome")
    table.add_column("claims", justify="right")
    table.add_row("verified", str(outcomes.get("passed", 0)))
    table.add_row("failed", str(outcomes.get("failed", 0)))
    table.add_row("skipped (needs CUDA)", str(needs_cuda))
    table.add_row("skipped (other)", str(outcomes.get("skipped", 0) - needs_cuda))
    table.add_row("no verifier ran", str(outcomes.get("not-run", 0)))
    table.add_row("rerun now", str(len(res.rerun)))
    table.add_row("reused (inputs unchanged)", str(len(res.reused)))
    console.print(table)
    origins: dict[str, int] = {}
    for cid in res.reused:
        run_info = res.claims[cid].get("run") or {}
        commit = (run_info.get("commit") or "no commit")[:10] + (" (dirty)" if run_info.get("dirty") else "")
        origins[commit] = origins.get(commit, 0) + 1
    if origins:
        console.print("reused results verified at " + ", ".join(f"{c}: {n}" for c, n in sorted(origins.items()))
                      + "  (--all reruns them)", markup=False, soft_wrap=True)
    for cid in res.failed:
        rec = res.claims[cid]
        msgs = [t.get("message") for t in rec.get("tests", []) if t.get("outcome") == "failed"]
        first = (msgs[0] if msgs else rec.get("message", "")) or ""
        label = "NOT RUN" if rec["outcome"] == "not-run" else "FAILED"  # as counted in the table above
        console.print(f"{label} {cid}: {first.splitlines()[0] if first else ''}", markup=False, style="red")
    console.print(f"report: build/verification.json   log: {res.log_path.relative_to(root)}", markup=False)
    if res.problem:
        err.print(f"[red]error:[/red] {res.problem}")
        raise typer.Exit(1)
    if res.failed:
        raise typer.Exit(1)


@app.command()
def zero(
    params: Annotated[str, typer.Option(help="number of parameters Ψ, e.g. 7e9")],
    gpus: Annotated[str, typer.Option(help="data-parallel degree N_d")],
    optimizer_bytes: Annotated[str, typer.Option(help="optimizer bytes per parameter K (Adam, fp32: 12)")] = "12",
    gpu_memory_gb: Annotated[Optional[str], typer.Option(help="say which stages fit a device of this many GB")] = None,
) -> None:
    """Per-GPU model-state memory and communication for DP and ZeRO-1/2/3."""
    try:
        from .calculators.zero_cli import ZeroInputError, parse_number, run as run_zero
    except ImportError:
        err.print("[red]error:[/red] the ZeRO calculator is not installed in this checkout")
        raise typer.Exit(2) from None
    try:
        values = dict(params=parse_number("--params", params), gpus=parse_number("--gpus", gpus, integer=True),
                      optimizer_bytes=parse_number("--optimizer-bytes", optimizer_bytes, integer=True),
                      gpu_memory_gb=None if gpu_memory_gb is None else parse_number("--gpu-memory-gb", gpu_memory_gb))
        _root_on_path()
        run_zero(**values)
    except ZeroInputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def mutants(
    names: Annotated[Optional[list[str]], typer.Argument(help="mutant names, name prefixes or files (default: all)")] = None,
    jobs: Annotated[int, typer.Option("-j", "--jobs", min=1, help="scratch copies run in parallel")] = 2,
    timeout: Annotated[int, typer.Option(help="seconds one mutant's tests may run")] = 300,
    max_examples: Annotated[int, typer.Option(help="hypothesis examples per property")] = 30,
    list_only: Annotated[bool, typer.Option("--list", help="list the mutants and the tests each would run")] = False,
) -> None:
    """Apply each mutant of mutants/*.py alone to a scratch copy and run the tests importing the changed module."""
    from .mutation import command

    raise typer.Exit(command(_root(), names, jobs, timeout, max_examples, list_only, console, err))


@app.command()
def kv(
    model: Annotated[str, typer.Option(help="preset: llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3.1-8b, "
                                            "llama-3.1-70b, qwen2.5-7b, qwen-14b, deepseek-v2-lite, deepseek-v2")],
    seq: Annotated[str, typer.Option(help="tokens per sequence, e.g. 8192")],
    batch: Annotated[str, typer.Option(help="concurrent sequences")] = "1",
    dtype: Annotated[str, typer.Option(help="cache element type: bf16 | fp16 | fp8 | fp32")] = "bf16",
) -> None:
    """KV-cache size of a model for a sequence length and batch, beside its MHA and MQA counterparts."""
    from .calculators.kv_cli import KVInputError, run as run_kv

    _root_on_path()
    try:
        run_kv(model=model, seq=seq, batch=batch, dtype=dtype, console=console)
    except KVInputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def pp(
    stages: Annotated[str, typer.Option(metavar="INT", help="pipeline stages (devices) p")] = "4",
    micro: Annotated[str, typer.Option(metavar="INT", help="micro-batches m per step")] = "8",
    schedule: Annotated[str, typer.Option(help="gpipe | 1f1b | interleaved | zb-h1")] = "1f1b",
    chunks: Annotated[Optional[str], typer.Option(metavar="INT", help="model chunks per device (interleaved; default 2)")] = None,
) -> None:
    """Pipeline schedule timeline, bubble fraction and peak in-flight micro-batches."""
    from .calculators.pp_cli import run as run_pp

    _root_on_path()
    try:
        run_pp(stages, micro, schedule, chunks)
    except ValueError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


gpu_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                      help="GPU calculators: occupancy from the per-capability table; what a Triton kernel compiles to.")
app.add_typer(gpu_app, name="gpu")


def _gpu_errors(fn):
    from .calculators.gpu_cli import GPUInputError

    try:
        fn()
    except GPUInputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@gpu_app.command("occupancy")
def gpu_occupancy(
    arch: Annotated[str, typer.Option(help="sm_70 | sm_80 | sm_86 | sm_89 | sm_90")] = "sm_90",
    threads: Annotated[str, typer.Option(metavar="INT", help="threads per block")] = "256",
    regs: Annotated[str, typer.Option(metavar="INT", help="registers per thread")] = "32",
    smem: Annotated[str, typer.Option(metavar="SIZE", help="shared memory per block, e.g. 48K (static + dynamic)")] = "0",
    carveout: Annotated[Optional[str], typer.Option(metavar="PCT", help="preferred shared-memory carveout, percent")] = None,
) -> None:
    """Blocks and warps per SM, occupancy and the limiting resource, like NVIDIA's occupancy calculator."""
    from .calculators.gpu_cli import run_occupancy

    _gpu_errors(lambda: run_occupancy(arch, threads, regs, smem, carveout, console=console))


@gpu_app.command("inspect")
def gpu_inspect(
    target: Annotated[str, typer.Argument(metavar="FILE.py::kernel", help="a @triton.jit function")],
    arch: Annotated[str, typer.Option(help="sm_80 | sm_86 | sm_89 | sm_90")] = "sm_90",
    constexpr: Annotated[Optional[list[str]], typer.Option(metavar="NAME=VALUE", help="a tl.constexpr value")] = None,
    arg: Annotated[Optional[list[str]], typer.Option(metavar="NAME=TYPE", help="a parameter's type (*fp16, i32, fp32)")] = None,
    dtype: Annotated[str, typer.Option(help="element type of parameters named *ptr")] = "fp32",
    num_warps: Annotated[str, typer.Option(metavar="INT")] = "4",
    num_stages: Annotated[str, typer.Option(metavar="INT")] = "3",
    align: Annotated[bool, typer.Option(help="assume pointers 16-byte aligned and integers divisible by 16")] = True,
    ptx: Annotated[bool, typer.Option("--ptx", help="print the PTX")] = False,
    sass: Annotated[bool, typer.Option("--sass", help="print the SASS")] = False,
) -> None:
    """Compile a Triton kernel for a GPU target (no GPU needed): registers, shared memory, spills, vector widths,
    Tensor-Core instructions and the occupancy they give."""
    from .calculators.gpu_cli import run_inspect

    _gpu_errors(lambda: run_inspect(target, arch, constexpr, arg, dtype, num_warps, num_stages, align, ptx, sass,
                                    console=console))


@app.command("train-cost")
def train_cost(
    model: Annotated[str, typer.Option(help="preset: llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b, "
                                            "llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, qwen2.5-7b, qwen3-8b, "
                                            "gpt-3-175b")],
    tokens: Annotated[str, typer.Option(help="training tokens D, e.g. 15e12")],
    gpus: Annotated[str, typer.Option(metavar="INT", help="number of GPUs")],
    gpu: Annotated[str, typer.Option(help="h100 | h200 | a100 | a100-40gb")] = "h100",
    mfu: Annotated[str, typer.Option(help="assumed model FLOPs utilisation, a fraction (0.4 = 40%)")] = "0.4",
    seq: Annotated[Optional[str], typer.Option(metavar="INT", help="sequence length T (default: the model's "
                                                                    "pretraining context)")] = None,
    recompute: Annotated[str, typer.Option(help="activation recomputation for HFU: none | selective | full")] = "none",
) -> None:
    """Training FLOPs (6ND + attention), wall-clock time and GPU-hours at an assumed MFU."""
    from .calculators.train_cost_cli import TrainCostInputError, run as run_train_cost

    _root_on_path()
    try:
        run_train_cost(model, tokens, gpus, gpu, mfu, seq, recompute, console=console)
    except TrainCostInputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def plan(
    model: Annotated[str, typer.Option(help="preset, e.g. llama-3-70b, llama-3.1-8b, qwen2.5-7b (see mianjing kv)")],
    gpus: Annotated[str, typer.Option(metavar="INT", help="GPUs in all")],
    gpus_per_node: Annotated[str, typer.Option(metavar="INT", help="GPUs per NVLink node")] = "8",
    zero: Annotated[str, typer.Option(metavar="INT", help="ZeRO stage of the data-parallel ranks: 0-3")] = "1",
    seq: Annotated[str, typer.Option(metavar="INT", help="tokens per sequence")] = "8192",
    batch: Annotated[str, typer.Option(metavar="INT", help="global batch, in sequences")] = "128",
    cluster: Annotated[str, typer.Option(help="dgx-h100 | dgx-a100 (peak FLOP/s, memory, link speeds)")] = "dgx-h100",
    top: Annotated[str, typer.Option(metavar="INT", help="layouts to show")] = "8",
) -> None:
    """DP x TP x PP (x CP) layouts of a model on a cluster: memory per GPU, step time, what does not fit."""
    from .calculators.plan_cli import PlanInputError, run as run_plan

    _root_on_path()
    try:
        run_plan(model, gpus, gpus_per_node, zero, seq, batch, cluster, top, console=console)
    except PlanInputError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


# --- site (owned by the site engineer): `mianjing site build|serve`, implemented in mianjing/site/cli.py
from .site.cli import site_app  # noqa: E402  (typer only; mkdocs is imported when a command runs)

app.add_typer(site_app, name="site")


# --- quiz (owned by the quiz engineer): `mianjing quiz|mock|stats|kata ...`; bodies in mianjing/quiz/commands.py
_DB_HELP = "review store (SQLite); default $MIANJING_DB or the user data directory"
_LANG_HELP = "zh | en (default from $MIANJING_LANG / the locale)"


@app.command()
def quiz(
    topic: Annotated[Optional[str], typer.Option(help="only this topic (and its subtopics), e.g. rl/ppo")] = None,
    company: Annotated[Optional[str], typer.Option(help="only questions asked at this company")] = None,
    difficulty: Annotated[Optional[int], typer.Option(min=1, max=3, help="1 warm-up, 2 core, 3 deep")] = None,
    lang: Annotated[Optional[str], typer.Option(help=_LANG_HELP)] = None,
    n: Annotated[int, typer.Option("-n", min=1, help="at most this many questions")] = 10,
    db: Annotated[Optional[Path], typer.Option(help=_DB_HELP)] = None,
) -> None:
    """Spaced-repetition quiz: due reviews first, then new questions; rate each Again/Hard/Good/Easy."""
    from .quiz.commands import quiz as run_quiz_cmd

    run_quiz_cmd(_root(), db=db, lang=lang, topic=topic, company=company, difficulty=difficulty, n=n)


@app.command()
def mock(
    minutes: Annotated[int, typer.Option(min=5, help="length of the round")] = 30,
    company: Annotated[Optional[str], typer.Option(help="prefer questions asked at this company")] = None,
    lang: Annotated[Optional[str], typer.Option(help=_LANG_HELP)] = None,
    out: Annotated[Optional[Path], typer.Option(help="write the closing report here (default: user data dir)")] = None,
    kata_dir: Annotated[Optional[Path], typer.Option(help="where the kata stub is written (default: .)")] = None,
    timeout: Annotated[float, typer.Option(help="seconds the kata judge lets your code run")] = 30.0,
    track: Annotated[Optional[str], typer.Option(help="draw the coding kata from this track: rl | ml | kernels | leetcode")] = None,
    topic: Annotated[Optional[str], typer.Option(help="prefer questions and a kata on this topic, e.g. coding/graph")] = None,
    db: Annotated[Optional[Path], typer.Option(help=_DB_HELP)] = None,
) -> None:
    """A whole interview round: warm-up, core, deep, one coding kata, then a report."""
    from .quiz.commands import mock as run_mock_cmd

    run_mock_cmd(_root(), db=db, lang=lang, minutes=minutes, company=company, out=out, kata_dir=kata_dir,
                 timeout=timeout, track=track, topic=topic)


@app.command()
def stats(
    lang: Annotated[Optional[str], typer.Option(help=_LANG_HELP)] = None,
    db: Annotated[Optional[Path], typer.Option(help=_DB_HELP)] = None,
) -> None:
    """Due today, reviews done, retention, weakest topics and key points."""
    from .quiz.commands import stats as run_stats_cmd

    run_stats_cmd(_root(), db=db, lang=lang)


kata_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                       help="Hand-written code judged locally by the verifiers' own properties.")
app.add_typer(kata_app, name="kata")


@kata_app.command("list")
def kata_list(
    track: Annotated[Optional[str], typer.Option(help="only this track: rl | ml | kernels | leetcode")] = None,
    lang: Annotated[Optional[str], typer.Option(help=_LANG_HELP)] = None,
) -> None:
    """The katas this checkout offers, by track (RL, ML, kernels, LeetCode), with difficulty and entry."""
    from .quiz.commands import kata_list as run

    run(_root(), track=track, lang=lang)


@kata_app.command("start")
def kata_start(
    name: Annotated[str, typer.Argument(help="kata name, see `mianjing kata list`")],
    dest: Annotated[Path, typer.Option("--to", help="folder or file for the stub")] = Path("."),
    force: Annotated[bool, typer.Option(help="overwrite an existing file")] = False,
    lang: Annotated[Optional[str], typer.Option(help="language of the stub's comments and docstrings: " + _LANG_HELP)] = None,
) -> None:
    """Write a stub (signature and conventions, no solution) to the current directory."""
    from .quiz.commands import kata_start as run

    run(_root(), name, dest=dest, force=force, lang=lang)


@kata_app.command("judge")
def kata_judge(
    file: Annotated[Path, typer.Argument(help="your solution file")],
    kata: Annotated[Optional[str], typer.Option(help="kata name (default: from the stub's marker or file name)")] = None,
    timeout: Annotated[float, typer.Option(help="wall-clock seconds your code may run")] = 30.0,
    memory_mb: Annotated[int, typer.Option(help="memory limit for your code (MiB)")] = 4096,
    record: Annotated[bool, typer.Option(help="count the judgement as a review of the kata's entry")] = True,
    lang: Annotated[Optional[str], typer.Option(help=_LANG_HELP)] = None,
    db: Annotated[Optional[Path], typer.Option(help=_DB_HELP)] = None,
) -> None:
    """Run the kata's property tests against your function in a separate, limited process."""
    from .quiz.commands import kata_judge as run

    run(_root(), file, name=kata, db=db, lang=lang, timeout=timeout, memory_mb=memory_mb, record=record)


def _root_on_path() -> Path:
    from .paths import ensure_importable

    root = _root()
    ensure_importable(root)
    return root


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
