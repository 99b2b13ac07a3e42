"""What the quiz needs to pick and show its first question, kept beside the build output.

``build/quiz-index.json`` holds, for every entry that validated, its id, topic, difficulty, kind,
companies and question text, under a fingerprint of the ``qa/`` files (path, size, mtime) and of
the schema. When the fingerprint matches, ``mianjing quiz`` shows the first question from it at
once while the one loader (pydantic, YAML) builds the real knowledge base in a background thread;
grading and everything after use the real entries. It is written after every full load and is
never the source of truth: a stale or unreadable index is simply rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

VERSION = 1


def index_path(root: Path) -> Path:
    return root / "build" / "quiz-index.json"


def fingerprint(root: Path) -> str:
    h = hashlib.sha1(f"v{VERSION}".encode())
    qa = root / "qa"
    stack = [str(qa)]
    files = []
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.name.endswith(".yaml"):
                        st = e.stat()
                        files.append(f"{os.path.relpath(e.path, qa)}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            continue
    for line in sorted(files):
        h.update(line.encode("utf-8", "surrogateescape"))
    schema = Path(__file__).resolve().parents[1] / "schema.py"
    try:
        h.update(str(schema.stat().st_mtime_ns).encode())
    except OSError:
        pass
    return h.hexdigest()


class _Text:
    __slots__ = ("zh", "en")

    def __init__(self, d: dict):
        self.zh, self.en = d["zh"], d["en"]

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


class _Kind:
    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value


class _Asked:
    __slots__ = ("company",)

    def __init__(self, company: str | None):
        self.company = company


class IndexEntry:
    """The fields of an entry that choosing and showing a question read (same names as ``Entry``)."""

    __slots__ = ("id", "topic", "difficulty", "kind", "asked_at", "question")

    def __init__(self, d: dict):
        self.id, self.topic, self.difficulty = d["id"], d["topic"], d["difficulty"]
        self.kind = _Kind(d["kind"])
        self.asked_at = [_Asked(c) for c in d["companies"]]
        self.question = _Text(d["question"])


class Index:
    def __init__(self, entries: list[dict], problems: int):
        self.entries = {d["id"]: IndexEntry(d) for d in entries}
        self.problems = problems


def read(root: Path) -> Index | None:
    try:
        data = json.loads(index_path(root).read_text(encoding="utf-8"))
        if data.get("fingerprint") != fingerprint(root):
            return None
        return Index(data["entries"], int(data.get("problems", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(root: Path, kb, problems: int) -> None:
    """Best effort (a read-only checkout simply has no index)."""
    entries = [{"id": e.id, "topic": e.topic, "difficulty": e.difficulty, "kind": e.kind.value,
                "companies": [a.company for a in e.asked_at], "question": {"zh": e.question.zh, "en": e.question.en}}
               for e in kb.entries.values()]
    path = index_path(root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fingerprint": fingerprint(root), "problems": problems, "entries": entries},
                                  ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


class Background:
    """The real knowledge base, loaded in a thread (and the grader's dictionaries warmed up after it)."""

    def __init__(self, root: Path):
        self.root = root
        self.kb = None
        self.problems: list = []
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Begin loading (call it once the question is on screen: the thread would compete for the
        interpreter with printing it). Idempotent."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mianjing-kb", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            from ..loader import load

            res = load(self.root)
            self.kb, self.problems = res.kb, res.problems
            write(self.root, res.kb, len(res.problems))
        except BaseException as exc:  # noqa: BLE001 -- reported by result()
            self.error = exc
        finally:
            self._done.set()
        try:
            from . import grading

            grading.warm_up()
        except Exception:  # noqa: BLE001 -- grading loads them itself when asked
            pass

    def result(self):
        self.start()
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.kb
