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


def mock(root: Path, *, db, lang, minutes, company, out, kata_dir, timeout, track=None, topic=None) -> None:
    from .judge import JudgeOptionError, check_options
    from .mock import _default_report_path, check_report_path, run_mock
    from .ui import t

    lang = check_lang(lang)
    track = check_track(track)
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
    if track is not None:
        from .katas import available

        if not any(k.track == track for k in available(root)):
            err.print(f"error: --track {track}: no kata of that track in this checkout (see `mianjing kata list`)",
                      markup=False, style="red")
            raise SystemExit(2)
    kb = load_kb(root)
    store = open_store(db)
    try:
        saved = run_mock(console, root, kb, store, lang=lang, minutes=minutes, company=company, out=out,
                         kata_dir=kata_dir or Path.cwd(), timeout=timeout, track=track, topic=topic)
    except KeyboardInterrupt:
        console.print()
        console.print(t("mock_interrupted", lang), markup=False, style="yellow")
        raise SystemExit(130) from None
    finally:
        store.close()
    if saved is None:
        raise SystemExit(1)


def check_track(track: str | None) -> str | None:
    from .katas import TRACKS

    if track is None:
        return None
    t = track.strip().casefold()
    if t not in TRACKS:
        err.print(f"error: --track must be one of {', '.join(TRACKS)}, not {track!r}", markup=False)
        raise SystemExit(2)
    return t


def _entry_facts(root: Path, wanted: set[str] | None = None) -> dict[str, tuple[int | None, str]]:
    """``entry id -> (difficulty, topic)`` read from the entry files with a regex (no YAML parser: listing stays
    fast); an entry's file is named by its id (the loader insists). ``wanted``: read only these entries' files."""
    import re

    out = {}
    for p in (root / "qa").rglob("*.yaml"):
        if wanted is not None and p.stem not in wanted:
            continue
        try:
            with open(p, encoding="utf-8") as fh:
                head = fh.read(3000)
        except OSError:
            continue
        d = re.search(r"^difficulty:\s*([123])\s*$", head, re.M)
        t = re.search(r"^topic:\s*([\w/-]+)\s*$", head, re.M)
        out[p.stem] = (int(d.group(1)) if d else None, t.group(1) if t else "")
    return out


DIFFICULTY = {1: ("1 warm-up", "1 热身"), 2: ("2 core", "2 核心"), 3: ("3 deep", "3 深挖")}


def kata_list(root: Path, track: str | None = None, lang: str | None = None) -> None:
    from rich.table import Table

    from .katas import TRACK_NAMES, TRACKS, available

    track = check_track(track)
    lang = check_lang(lang)
    zh = lang == "zh"
    katas = available(root)
    if not katas:
        console.print("本仓库还没有可用的 kata（参考实现或性质模块尚未合入）" if zh else
                      "no katas available in this checkout (their reference or properties have not landed)",
                      markup=False)
        return
    facts = _entry_facts(root, {k.entry for k in katas})
    shown = 0
    for t in TRACKS:
        if track and t != track:
            continue
        group = [k for k in katas if k.track == t]
        title = TRACK_NAMES[t][1 if zh else 0]
        if not group:
            console.print(f"{title}: " + ("暂无" if zh else "none yet"), markup=False, style="dim")
            continue
        table = Table(title=f"{title} · {len(group)}" + (" 个 kata" if zh else " katas"), title_justify="left")
        for col in (("名称", "难度", "题目（条目）", "性质") if zh else ("name", "difficulty", "entry", "properties")):
            table.add_column(col)
        for k in group:
            diff, _ = facts.get(k.entry, (None, ""))
            table.add_row(k.name, DIFFICULTY[diff][1 if zh else 0] if diff else "-",
                          k.entry if k.entry in facts else "-", str(len(k.property_names(root))))
            shown += 1
        console.print(table)
    console.print((f"共 {shown} 个 kata。开始：mianjing kata start NAME [--lang zh|en]   评测：mianjing kata judge FILE")
                  if zh else (f"{shown} katas. Start one: mianjing kata start NAME [--lang zh|en]   "
                              "judge it: mianjing kata judge FILE"), markup=False)


def kata_start(root: Path, name: str, *, dest: Path, force: bool, lang: str | None = None) -> None:
    from .katas import find, stub

    lang = check_lang(lang)
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
        path.write_text(stub(root, k, lang), encoding="utf-8")
    except OSError as exc:
        err.print(f"error: cannot write {path}: {exc.strerror or exc}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None
    console.print((f"已写入 {path}：实现 `{k.symbol}`，然后运行：mianjing kata judge {path}" if lang == "zh" else
                   f"wrote {path}: implement `{k.symbol}`, then run: mianjing kata judge {path}"),
                  markup=False, soft_wrap=True)


def kata_judge(root: Path, file: Path, *, name: str | None, db, lang, timeout: float, memory_mb: int,
               record: bool) -> None:
    from .judge import JudgeOptionError, check_options, detect_kata, judge
    from .judge_report import print_outcome, print_result, print_start, record_review

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
                    on_start=lambda kind, note: print_start(console, kind, note),
                    on_result=lambda r: print_result(console, r))
    except JudgeOptionError as exc:
        err.print(f"error: {exc}", markup=False, style="red", soft_wrap=True)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        console.print("\ninterrupted: the judge was stopped; nothing recorded", markup=False, style="yellow")
        raise SystemExit(130) from None
    print_outcome(console, res)
    if store is not None:
        try:
            saved = record_review(root, store, k, res, lang)
            if saved:
                console.print(saved, markup=False, style="dim", soft_wrap=True)
        finally:
            store.close()
    if not res.ok:
        raise SystemExit(1)
