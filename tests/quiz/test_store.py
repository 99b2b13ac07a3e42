"""The review store: durable, shareable between processes, versioned, never clobbers a foreign file."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

from mianjing.quiz import scheduler
from mianjing.quiz.store import SCHEMA_VERSION, Review, Store, StoreError


def _review(store: Store, entry_id: str, rating: int, at: datetime | None = None) -> str:
    at = at or datetime.now(timezone.utc)
    return store.record(
        Review(entry_id, "rl/gae", rating, at.isoformat(), "quiz", ["a"], ["b"], 1.0, rating, "en"),
        scheduler.card_id(entry_id), lambda cj: scheduler.review(cj, entry_id, rating, at))


def test_card_id_is_stable_and_not_pythons_salted_hash():
    # Independent recomputation: first 8 bytes of sha256, big-endian, shifted to 63 bits.
    want = int(hashlib.sha256(b"gae-basics").hexdigest()[:16], 16) // 2
    assert scheduler.card_id("gae-basics") == want
    assert 0 < want < 2**63
    assert scheduler.card_id("gae-basics") != scheduler.card_id("gae-basic")


def test_review_is_committed_and_card_rescheduled(tmp_path):
    path = tmp_path / "r.sqlite3"
    s = Store(path)
    t0 = datetime.now(timezone.utc)
    due1 = _review(s, "e1", 3, t0)
    assert datetime.fromisoformat(due1) > t0
    # A second process (a fresh connection) sees it without any close/flush.
    other = sqlite3.connect(path)
    assert other.execute("SELECT entry_id, rating FROM reviews").fetchall() == [("e1", 3)]
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    # Rated Good again later: FSRS moves the card further out.
    t1 = datetime.fromisoformat(due1) + timedelta(minutes=1)
    due2 = _review(s, "e1", 3, t1)
    assert datetime.fromisoformat(due2) - t1 > datetime.fromisoformat(due1) - t0
    assert len(s.reviews()) == 2
    assert s.due_entries(datetime.fromisoformat(due2) + timedelta(seconds=1)) == ["e1"]
    s.close()


def test_corrupt_or_foreign_files_are_refused_and_left_untouched(tmp_path):
    junk = tmp_path / "notes.sqlite3"
    junk.write_bytes(b"this is my diary, not a database\n" * 10)
    foreign = tmp_path / "other.sqlite3"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE photos (id INTEGER)")
    con.commit()
    con.close()
    imposter = tmp_path / "imposter.sqlite3"
    con = sqlite3.connect(imposter)
    con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("INSERT INTO meta VALUES ('app', 'anki')")
    con.commit()
    con.close()
    for path, words in ((junk, "not a SQLite database"), (foreign, "some other program"),
                        (imposter, "another program")):
        before = path.read_bytes()
        with pytest.raises(StoreError, match=words):
            Store(path)
        assert path.read_bytes() == before, f"{path.name} was modified"
    with pytest.raises(StoreError, match="not a file"):
        Store(tmp_path)


def test_newer_schema_is_refused_and_older_is_migrated(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite3"
    Store(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)
    # A store at version 1 meets a release at version 2 with a migration: migrated in place.
    path2 = tmp_path / "old.sqlite3"
    s = Store(path2)
    _review(s, "e1", 3)
    s.close()
    from mianjing.quiz import store as store_mod

    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(store_mod.MIGRATIONS, SCHEMA_VERSION + 1, "ALTER TABLE reviews ADD COLUMN note TEXT")
    s = Store(path2)
    cols = [r[1] for r in s.con.execute("PRAGMA table_info(reviews)")]
    version = s.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    assert "note" in cols and version == str(SCHEMA_VERSION + 1)
    assert [r.entry_id for r in s.reviews()] == ["e1"]
    s.close()


def _writer(path: str, who: int, n: int) -> None:
    s = Store(path)
    for i in range(n):
        _review(s, f"e{i % 3}", 1 + (i + who) % 4)
    s.close()


def test_two_processes_at_once_do_not_corrupt_the_store(tmp_path):
    path = tmp_path / "shared.sqlite3"
    Store(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 25)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT count(*) FROM reviews").fetchone()[0] == 50
    assert con.execute("SELECT count(*) FROM cards").fetchone()[0] == 3
    con.close()
