"""Bodies of the ``quiz``, ``mock``, ``stats`` and ``kata`` commands (cli.py stays thin).

Start-up path of ``mianjing quiz`` (``mianjing.entry`` calls :func:`quiz` without typer): rich,
sqlite3 and the knowledge-base index; pydantic, yaml and the full load run in a background thread
while the candidate reads the first question (see benchmarks/quiz_startup.py). Exits are
``SystemExit`` so this module does not import typer either.
"""

from __future__ import annotations

import locale
import os
from pathlib import Path

from rich.console import Console

console = Console(highlight=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def default_lang() -> str:
    for var in ("MIANJING_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        v = os.environ.get(var, "")
        if v:
            return "zh" if v.lower().startswith("zh") else "en"
    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


def check_lang(lang: str | None) -> str:
    lang = lang or default_lang()
    if lang not in ("zh", "en"):
        err.print(f"error: --lang must be zh or en, not {lang!r}", markup=False)
        raise SystemExit(2)
    return lang


def open_store(db: Path | None):
    from .store import Store, StoreError

    try:
        return Store(db)
    except StoreError as exc:
        err.print(f"error: {exc}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None


def load_kb(root: Path):
    from ..loader import load
    from . import kbindex

    res = load(root)
    kbindex.write(root, res.kb, len(res.problems))
    if res.problems:
        err.print(f"warning: {len(res.problems)} problem(s) in qa/ (run `mianjing check`); "
                  "entries that failed validation are left out", markup=False, style="yellow")
    if not res.kb.entries:
        err.print("error: the knowledge base has no entries", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2)
    return res.kb


def quiz(root: Path, *, db, lang, topic, company, difficulty, n) -> None:
    from .session import SessionLog, run_quiz
    from .ui import t

    from . import kbindex

    lang = check_lang(lang)
    index = kbindex.read(root)
    full = None
    if index is None:  # first run, or qa/ changed: the full load now (and the index for next time)
        kb = load_kb(root)
    else:
        if index.problems:
            err.print(f"warning: {index.problems} problem(s) in qa/ (run `mianjing check`); "
                      "entries that failed validation are left out", markup=False, style="yellow")
        if not index.entries:
            err.print("error: the knowledge base has no entries", markup=False, style="red")
            raise SystemExit(2)
        kb, full = index, kbindex.Background(root)
    store = open_store(db)
    log = SessionLog()
    from .store import StoreError

    try:
        run_quiz(console, kb, store, lang=lang, topic=topic, company=company, difficulty=difficulty, n=n, log=log,
                 full=full)
    except StoreError as exc:
        err.print(f"error: {exc} ({log.rated} rated question(s) were saved before this)", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        console.print()
        console.print(t("interrupted", lang, n=log.rated), markup=False, style="yellow")
        raise SystemExit(130) from None
    finally:
        store.close()


def stats(root: Path, *, db, lang) -> None:
    from .stats import compute, render

    lang = check_lang(lang)
    kb = load_kb(root)
    store = open_store(db)
    try:
        render(console, compute(kb, store), lang)
    finally:
        store.close()


def mock(root: Path, *, db, lang, minutes, company, out, kata_dir, timeout) -> None:
    from .judge import JudgeOptionError, check_options
    from .mock import _default_report_path, check_report_path, run_mock
    from .ui import t

    lang = check_lang(lang)
    try:
        check_options(timeout, 4096)
    except JudgeOptionError as exc:
        err.print(f"error: {exc}", markup=False, style="red")
        raise SystemExit(2) from None
    problem = check_report_path(out) if out is not None else None
    if out is None:
        try:
            _default_report_path().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            problem = f"cannot create {_default_report_path().parent} ({exc.strerror or exc}); pass --out"
    if problem:
        err.print(f"error: --out: {problem}", markup=False, style="red")
        raise SystemExit(2)
    if kata_dir is not None and not kata_dir.is_dir():
        err.print(f"error: --kata-dir: no such folder {kata_dir}", markup=False, style="red")
        raise SystemExit(2)
    kb = load_kb(root)
    store = open_store(db)
    try:
        saved = run_mock(console, root, kb, store, lang=lang, minutes=minutes, company=company, out=out,
                 kata_dir=kata_dir or Path.cwd(), timeout=timeout)
    except KeyboardInterrupt:
        console.print()
        console.print(t("mock_interrupted", lang), markup=False, style="yellow")
        raise SystemExit(130) from None
    finally:
        store.close()
    if saved is None:
        raise SystemExit(1)


def kata_list(root: Path) -> None:
    from rich.table import Table

    from .katas import available

    katas = available(root)
    if not katas:
        console.print("no katas available in this checkout (their reference or properties have not landed)")
        return
    # An entry's file is named by its id (the loader insists): no YAML needs parsing to list them.
    entry_files = {p.stem for p in (root / "qa").rglob("*.yaml")}
    table = Table(title="katas")
    for col in ("name", "reference", "properties", "entry"):
        table.add_column(col)
    for k in katas:
        table.add_row(k.name, f"{k.ref_path}::{k.symbol}", str(len(k.properties(root))),
                      k.entry if k.entry in entry_files else "-")
    console.print(table)
    console.print("start one: mianjing kata start NAME   judge it: mianjing kata judge FILE", markup=False)


def kata_start(root: Path, name: str, *, dest: Path, force: bool) -> None:
    from .katas import find, stub

    k = find(root, name)
    if k is None:
        err.print(f"error: no kata named {name!r}; see `mianjing kata list`", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2)
    if dest.is_dir():
        path = dest / f"{k.name}.py"
    elif dest.suffix == ".py" and dest.parent.is_dir():
        path = dest
    else:
        folder = dest if dest.suffix != ".py" else dest.parent
        err.print(f"error: --to {dest}: no such folder {folder} (create it first, or name a .py file in an "
                  "existing folder)", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2)
    if path.exists() and not force:
        err.print(f"error: {path} exists; pass --force to overwrite it", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2)
    try:
        path.write_text(stub(root, k), encoding="utf-8")
    except OSError as exc:
        err.print(f"error: cannot write {path}: {exc.strerror or exc}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None
    console.print(f"wrote {path}: implement `{k.symbol}`, then run: mianjing kata judge {path}", markup=False, soft_wrap=True)


def kata_judge(root: Path, file: Path, *, name: str | None, db, lang, timeout: float, memory_mb: int,
               record: bool) -> None:
    from . import sandbox
    from .judge import JudgeOptionError, check_options, detect_kata, judge, print_result, record_review

    try:
        check_options(timeout, memory_mb)
    except JudgeOptionError as exc:
        err.print(f"error: {exc}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None
    lang = check_lang(lang)
    if not file.is_file():
        err.print(f"error: no such file: {file}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2)
    k = detect_kata(root, file, name)
    if k is None:
        err.print(f"error: cannot tell which kata {file} is; pass --kata NAME (see `mianjing kata list`)",
                  markup=False, style="red")
        raise SystemExit(2)
    store = open_store(db) if record else None  # a store we cannot write is reported before judging
    console.print(f"judging {file} as kata {k.name} (limit {timeout:g} s per property, {memory_mb} MiB)",
                  markup=False, soft_wrap=True)
    try:
        res = judge(root, k, file, timeout=timeout, memory_mb=memory_mb,
                    on_start=lambda kind: console.print(f"sandbox: {sandbox.describe(kind)}", markup=False,
                                                        style="dim", soft_wrap=True),
                    on_result=lambda r: print_result(console, r))
    except JudgeOptionError as exc:
        err.print(f"error: {exc}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        console.print("\ninterrupted: the judge was stopped; nothing recorded", markup=False, style="yellow")
        raise SystemExit(130) from None
    if res.fatal:
        console.print(f"FAILED: {res.fatal}", markup=False, style="bold red", soft_wrap=True)
        for line in res.fatal_detail.splitlines()[:20]:
            console.print(f"        {line}", markup=False, soft_wrap=True)
    if res.attempts:
        console.print("note: your code tried to reach what the judge keeps to itself: " + "; ".join(res.attempts[:5]),
                      markup=False, style="yellow", soft_wrap=True)
    console.print(res.summary(), markup=False, style="bold green" if res.ok else "bold red", soft_wrap=True)
    if store is not None:
        try:
            saved = record_review(root, store, k, res, lang)
            if saved:
                console.print(saved, markup=False, style="dim")
        finally:
            store.close()
    if not res.ok:
        raise SystemExit(1)
