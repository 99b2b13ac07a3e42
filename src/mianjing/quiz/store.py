"""The review store: one SQLite file (standard library) in the user data directory.

* ``--db PATH`` > ``$MIANJING_DB`` > ``platformdirs.user_data_dir("mianjing")/reviews.sqlite3``.
* WAL journal and ``BEGIN IMMEDIATE`` transactions: every review is committed the moment
  it is rated, so Ctrl-C loses nothing already rated and two quiz processes can share it.
* ``meta`` holds ``app = mianjing`` and ``schema_version``; a later release migrates
  through :data:`MIGRATIONS`. A file that is not SQLite, or a SQLite file that is not
  ours, raises :class:`StoreError` with a clear message and is never written to.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

APP = "mianjing"
SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE cards (
    entry_id   TEXT PRIMARY KEY,
    card_id    INTEGER NOT NULL UNIQUE,
    card       TEXT NOT NULL,          -- fsrs.Card.to_json()
    due        TEXT NOT NULL,          -- ISO 8601 UTC, copied out of `card` for ordering
    updated_at TEXT NOT NULL
);
CREATE TABLE reviews (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id    TEXT NOT NULL,
    card_id     INTEGER NOT NULL,
    topic       TEXT NOT NULL,
    rating      INTEGER NOT NULL,      -- 1 Again, 2 Hard, 3 Good, 4 Easy (fsrs.Rating)
    suggested   INTEGER,
    reviewed_at TEXT NOT NULL,
    duration_s  REAL,
    lang        TEXT,
    source      TEXT NOT NULL,         -- quiz | mock | kata
    covered     TEXT NOT NULL DEFAULT '[]',  -- key points (English text) the answer covered
    missed      TEXT NOT NULL DEFAULT '[]'   -- key points it missed
);
CREATE INDEX reviews_entry ON reviews(entry_id);
CREATE INDEX reviews_time ON reviews(reviewed_at);
CREATE TABLE mock_reports (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    path       TEXT,
    report     TEXT NOT NULL           -- JSON
);
"""

# version -> SQL that upgrades a store of version-1 to version (run in one transaction)
MIGRATIONS: dict[int, str] = {}


class StoreError(RuntimeError):
    """A store we cannot use; the message says why and what to do."""


def default_path() -> Path:
    env = os.environ.get("MIANJING_DB")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("mianjing", appauthor=False)) / "reviews.sqlite3"


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Review:
    entry_id: str
    topic: str
    rating: int
    reviewed_at: str
    source: str
    covered: list[str]
    missed: list[str]
    duration_s: float | None = None
    suggested: int | None = None
    lang: str | None = None


TABLES = {"meta": {"key", "value"},
          "cards": {"entry_id", "card_id", "card", "due", "updated_at"},
          "reviews": {"id", "entry_id", "card_id", "topic", "rating", "suggested", "reviewed_at", "duration_s", "lang",
                      "source", "covered", "missed"},
          "mock_reports": {"id", "created_at", "path", "report"}}
_ELSEWHERE = "it was left untouched; pass another file with --db or MIANJING_DB"


class Store:
    """Opening checks everything a session will need -- the folder, the file, its tables, that it
    can be written -- so a problem is reported before the first question, never after an answer."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path).expanduser() if path else default_path()
        self._check_file()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder {self.path.parent} for the review store "
                             f"({exc.strerror or exc}); pass another file with --db or MIANJING_DB") from None
        try:
            self.con = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the review store {self.path}: {exc}") from None
        try:
            self.con.execute("PRAGMA busy_timeout = 10000")
            self._prepare()
            self._check_usable()
        except sqlite3.DatabaseError as exc:
            self.con.close()
            raise StoreError(f"{self.path} is not a usable mianjing review store ({exc}); {_ELSEWHERE}") from None
        except StoreError:
            self.con.close()
            raise

    # -- opening -----------------------------------------------------------------------------
    def _check_file(self) -> None:
        p = self.path
        if p.exists() and not p.is_file():
            raise StoreError(f"{p} is not a file; pass a file path with --db or MIANJING_DB")
        if p.is_file() and p.stat().st_size == 0:
            raise StoreError(f"{p} is an empty file (0 bytes), not a review store; delete it to start a new "
                             "store there, or pass another file with --db or MIANJING_DB")
        if p.is_file() and not os.access(p, os.R_OK):
            raise StoreError(f"{p} cannot be read (permission denied); pass another file with --db or MIANJING_DB")
        if p.is_file() and not (os.access(p, os.W_OK) and os.access(p.parent, os.W_OK)):
            where = p if not os.access(p, os.W_OK) else p.parent
            raise StoreError(f"the review store {p} cannot be written ({where} is read-only): reviews would be lost; "
                             "fix its permissions or pass another file with --db or MIANJING_DB")
        if p.is_file() and p.stat().st_size > 0:
            with open(p, "rb") as fh:
                head = fh.read(16)
            if head != SQLITE_MAGIC:
                raise StoreError(f"{p} is not a SQLite database (corrupt or some other file); it was left "
                                 "untouched; pass another file with --db or MIANJING_DB")

    def _prepare(self) -> None:
        con = self.con
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            con.execute("BEGIN IMMEDIATE")
            try:
                if not {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}:
                    for stmt in filter(str.strip, _V1.split(";")):
                        con.execute(stmt)
                    con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', ?)", (APP, str(SCHEMA_VERSION)))
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            tables = {"meta"}
        if "meta" not in tables and tables <= {"sqlite_sequence"}:
            raise StoreError(f"{self.path} has no tables (damaged?); {_ELSEWHERE}")
        if "meta" not in tables:
            raise StoreError(f"{self.path} is a SQLite database of some other program (no mianjing tables); "
                             "it was left untouched; pass another file with --db or MIANJING_DB")
        meta = dict(con.execute("SELECT key, value FROM meta"))
        if meta.get("app") != APP:
            raise StoreError(f"{self.path} belongs to another program (app={meta.get('app')!r}); "
                             "it was left untouched; pass another file with --db or MIANJING_DB")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}, newer than this mianjing "
                             f"understands ({SCHEMA_VERSION}); upgrade mianjing")
        if version < SCHEMA_VERSION:
            self._migrate(version)
        con.execute("PRAGMA journal_mode = WAL")

    def _check_usable(self) -> None:
        """Every table and column present, the pages sound, and a write possible."""
        con = self.con
        for table, cols in TABLES.items():
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if not have:
                raise StoreError(f"{self.path} has no `{table}` table (damaged, or edited by hand); {_ELSEWHERE}")
            if cols - have:
                raise StoreError(f"{self.path}: table `{table}` lacks column(s) {', '.join(sorted(cols - have))}; "
                                 f"{_ELSEWHERE}")
        bad = [r[0] for r in con.execute("PRAGMA quick_check(5)")]
        if bad != ["ok"]:
            first = next((ln for r in bad for ln in str(r).splitlines() if ln.strip() and not ln.startswith("***")),
                         str(bad[0]))
            raise StoreError(f"{self.path} is damaged (sqlite quick_check: {first.strip()[:160]}); {_ELSEWHERE}")
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return  # another quiz is writing now; the busy timeout covers it when we write
            raise StoreError(f"the review store {self.path} cannot be written ({exc}): reviews would be lost; "
                             "fix its permissions or pass another file with --db or MIANJING_DB") from None

    def _migrate(self, version: int) -> None:
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            for v in range(version + 1, SCHEMA_VERSION + 1):
                if v not in MIGRATIONS:
                    raise StoreError(f"{self.path}: no migration from schema version {v - 1} to {v}")
                for stmt in filter(str.strip, MIGRATIONS[v].split(";")):
                    con.execute(stmt)
                con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(v),))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- cards -------------------------------------------------------------------------------
    def card_json(self, entry_id: str) -> str | None:
        row = self.con.execute("SELECT card FROM cards WHERE entry_id = ?", (entry_id,)).fetchone()
        return row[0] if row else None

    def cards(self) -> dict[str, tuple[str, str]]:
        """entry id -> (due ISO, card json)."""
        return {e: (d, c) for e, d, c in self.con.execute("SELECT entry_id, due, card FROM cards")}

    def due_entries(self, at: datetime) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT entry_id FROM cards WHERE due <= ? ORDER BY due, entry_id", (at.isoformat(),))]

    def record(self, review: Review, card_id: int, update) -> str:
        """Atomically: read the entry's card, ``update(card_json_or_None) -> (new_json, due_iso)``,
        store it and the review row. Returns the new due date (ISO)."""
        con = self.con
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:  # locked past busy_timeout by another process
            raise StoreError(f"the review store {self.path} is busy ({exc}); try again") from None
        try:
            row = con.execute("SELECT card FROM cards WHERE entry_id = ?", (review.entry_id,)).fetchone()
            new_json, due = update(row[0] if row else None)
            con.execute(
                "INSERT INTO cards (entry_id, card_id, card, due, updated_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(entry_id) DO UPDATE SET card = excluded.card, due = excluded.due, "
                "updated_at = excluded.updated_at",
                (review.entry_id, card_id, new_json, due, review.reviewed_at))
            con.execute(
                "INSERT INTO reviews (entry_id, card_id, topic, rating, suggested, reviewed_at, duration_s, "
                "lang, source, covered, missed) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (review.entry_id, card_id, review.topic, review.rating, review.suggested, review.reviewed_at,
                 review.duration_s, review.lang, review.source,
                 json.dumps(review.covered, ensure_ascii=False), json.dumps(review.missed, ensure_ascii=False)))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return due

    # -- reviews -----------------------------------------------------------------------------
    def reviews(self, since: str | None = None) -> list[Review]:
        q = ("SELECT entry_id, topic, rating, reviewed_at, source, covered, missed, duration_s, suggested, lang "
             "FROM reviews")
        args: tuple = ()
        if since:
            q += " WHERE reviewed_at >= ?"
            args = (since,)
        q += " ORDER BY id"
        return [Review(e, t, r, at, s, json.loads(c), json.loads(m), d, sg, lg)
                for e, t, r, at, s, c, m, d, sg, lg in self.con.execute(q, args)]

    def save_mock_report(self, report: dict, path: str | None) -> int:
        """Keep a mock report (its JSON, and the markdown under ``report["markdown"]``); returns its id."""
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            cur = con.execute("INSERT INTO mock_reports (created_at, path, report) VALUES (?, ?, ?)",
                              (now_utc().isoformat(), path, json.dumps(report, ensure_ascii=False)))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return int(cur.lastrowid)
