"""A survey's state in a SQLite file: each file's audit as it is done, each repo's row when its files are.

An interrupted survey run again reads no file twice (the files already audited are taken from here) and
finishes the repos it had started; a repo whose row is here for the commit the listing names now is not
audited again. A repo that failed (deadline, gone) is tried again by the next run. Every write is its own
transaction: a process killed between two writes leaves the file as it was after the first. The file is in WAL
mode with ``synchronous=NORMAL``: a commit is safe from the process's end (Ctrl-C, a kill) without an fsync of its
own (one per write cost 17 ms each on a busy disk, 4 s of a 58-repo survey); a power cut may lose the last
writes, never the file's consistency, and a lost write is a file read again by the next run.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any

from gguftpl.errors import UsageError

__all__ = ["SurveyState"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS repos (repo TEXT PRIMARY KEY, sha TEXT, ok INTEGER NOT NULL, row TEXT NOT NULL,
                                  updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS files (repo TEXT NOT NULL, sha TEXT NOT NULL, path TEXT NOT NULL, record TEXT NOT NULL,
                                  PRIMARY KEY (repo, sha, path));
"""


class SurveyState:
    """The state file, or an in-memory one (``path`` None) for a survey without ``--state``."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else ":memory:"
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            if path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"--state {self.path}: not a survey state file ({exc})") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SurveyState:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def row(self, repo: str) -> tuple[str | None, bool, dict[str, Any]] | None:
        """(commit, audited without error, row) of the repo's last run, or None."""
        with self._lock:
            got = self._db.execute("SELECT sha, ok, row FROM repos WHERE repo = ?", (repo,)).fetchone()
        return None if got is None else (got[0], bool(got[1]), json.loads(got[2]))

    def put_row(self, repo: str, sha: str | None, ok: bool, row: dict[str, Any]) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO repos VALUES (?, ?, ?, ?, ?)",
                (repo, sha, int(ok), json.dumps(row), time.time()),
            )
            if ok and sha:  # the repo's files are in its row now
                self._db.execute("DELETE FROM files WHERE repo = ? AND sha != ?", (repo, sha))

    def files(self, repo: str, sha: str) -> dict[str, dict[str, Any]]:
        """Path -> record of the repo's files already audited at this commit."""
        with self._lock:
            rows = self._db.execute("SELECT path, record FROM files WHERE repo = ? AND sha = ?", (repo, sha)).fetchall()
        return {p: json.loads(r) for p, r in rows}

    def put_file(self, repo: str, sha: str, path: str, record: dict[str, Any]) -> None:
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", (repo, sha, path, json.dumps(record)))
