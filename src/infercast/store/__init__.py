"""The embedded store: one SQLite file (WAL) of platforms, configs, measurements, op rows, failures.

Every measurement is written in one transaction with its op rows, so a process killed at any
moment leaves either the whole measurement or nothing. ``UNIQUE(config, platform, campaign)``
makes a second write of the same item impossible, and ``done()`` tells a resumed campaign what to
skip. A file that is not an infercast store is refused with a clear message and never modified.

The schema is ``store.schema``; the rows it holds, as Python objects, ``store.records``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from infercast.store.connection import StoreError, connect, create, wait_s
from infercast.store.drift import Drift, estimate, session_intervals
from infercast.store.records import Measurement, Platform
from infercast.store.schema import SCHEMA_VERSION, SENTINELS_TABLE, TABLES
from infercast.tables import write_table


class Store:
    """``Store(path)`` opens (or creates) a store file; use as a context manager or ``close()``.

    ``Store(path, readonly=True)`` is for commands that only read: it never creates, migrates or
    writes the file, and leaves no ``-wal`` / ``-shm`` file beside it that was not there."""

    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        exists = self.path.is_file() and self.path.stat().st_size > 0
        if readonly and not exists:
            state = "is empty (0 bytes)" if self.path.is_file() else "does not exist"
            raise StoreError(
                f"{self.path} {state}: not an infercast store (profile or measure --db into it first); "
                "nothing was changed"
            )
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory: name a store file, e.g. {self.path / 'runs.db'}")
        blank = self._check_foreign(readonly) if exists else True
        if not exists and not self.path.parent.is_dir():
            raise StoreError(
                f"cannot create the store {self.path}: the directory {self.path.parent} does not exist "
                "(create it first)"
            )
        if readonly:
            self.db = sqlite3.connect(self._readonly_uri(), uri=True, timeout=wait_s(), isolation_level=None)
            return
        if blank:
            create(self.path, replace=exists)
        self.db = connect(self.path)
        self._migrate()

    def _migrate(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if int(row[0]) >= SCHEMA_VERSION:
            return
        with self.transaction() as db:
            db.execute(SENTINELS_TABLE)
            db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _readonly_uri(self) -> str:
        """A read-only SQLite URI. With no ``-wal`` beside the file (no writer at work, the last one
        checkpointed) the file is opened ``immutable``: SQLite then creates no ``-wal`` / ``-shm``.
        While a writer works its ``-wal`` exists and a plain read-only open shares it."""
        writer_at_work = Path(f"{self.path}-wal").exists()
        return f"{self.path.resolve().as_uri()}?mode=ro" + ("" if writer_at_work else "&immutable=1")

    def _check_foreign(self, readonly: bool) -> bool:
        """Refuse, read-only and leaving nothing beside the file, anything that is not an infercast
        store of a schema we know. True for a SQLite file without a single table (a creation that
        failed before its schema was written, by an older infercast): a writer makes it a store."""
        with self.path.open("rb") as handle:
            header = handle.read(100)
        if header[:16] != b"SQLite format 3\x00":
            raise StoreError(f"{self.path} is not a SQLite database (no SQLite header); nothing was changed")
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        if len(header) < 100 or self.path.stat().st_size < page_size * pages:
            raise StoreError(
                f"{self.path} is truncated ({self.path.stat().st_size:,} bytes, its header says "
                f"{page_size * pages:,}): a damaged copy; nothing was changed"
            )
        try:
            probe = sqlite3.connect(self._readonly_uri(), uri=True)
            try:
                tables = {
                    row[0] for row in probe.execute("SELECT name FROM sqlite_master WHERE type='table'")
                }
                version = None
                if "meta" in tables:
                    row = probe.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                    version = row[0] if row else None
                if tables >= TABLES:
                    probe.execute("SELECT count(*) FROM measurements").fetchone()
            finally:
                probe.close()
        except sqlite3.DatabaseError as error:
            raise StoreError(
                f"{self.path} is not a readable SQLite database ({error}: damaged or truncated); "
                "nothing was changed"
            ) from None
        if not tables and not readonly:
            return True
        if not tables >= TABLES or version is None:
            raise StoreError(f"{self.path} is a SQLite file but not an infercast store; nothing was changed")
        if not str(version).isdigit():
            raise StoreError(
                f"{self.path}: store schema version {version!r} is not a number; nothing was changed"
            )
        if int(version) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has store schema {version}, newer than this infercast ({SCHEMA_VERSION}): "
                "upgrade infercast to read it; nothing was changed"
            )
        return False

    # --- plumbing ---------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction; inside a caller's, part of that one (all its writes or none)."""
        if self.db.in_transaction:
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writes -----------------------------------------------------------------------------
    def add_platform(self, platform: Platform) -> str:
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO platforms VALUES (?, ?, ?, ?, ?)",
                (
                    platform.id,
                    platform.backend,
                    _json(platform.settings),
                    _json(platform.fingerprint),
                    time.time(),
                ),
            )
        return platform.id

    def add_configs(self, rows: Iterable[dict[str, Any]]) -> None:
        """Rows with ``id``, ``model`` and optionally ``space``, ``params``, ``features``."""
        values = [
            (r["id"], r["model"], r.get("space"), _json(r.get("params")), _json(r.get("features")))
            for r in rows
        ]
        with self.transaction() as db:
            db.executemany("INSERT OR IGNORE INTO configs VALUES (?, ?, ?, ?, ?)", values)

    def add_measurement(self, platform_id: str, campaign: str, m: Measurement) -> int | None:
        """Store one measurement and its op rows atomically; ``None`` if it was already stored."""
        record = asdict(m)
        ops = record.pop("ops")
        record["samples"] = _json(record["samples"])
        record["cap_hit"] = int(record["cap_hit"])
        columns = ["platform_id", "campaign", "created_at", *record]
        values = [platform_id, campaign, time.time(), *record.values()]
        placeholders = ", ".join("?" * len(values))
        with self.transaction() as db:
            cursor = db.execute(
                f"INSERT OR IGNORE INTO measurements ({', '.join(columns)}) VALUES ({placeholders})", values
            )
            if cursor.rowcount == 0:
                return None
            measurement_id = cursor.lastrowid
            db.executemany(
                "INSERT INTO op_measurements (measurement_id, node_index, row) VALUES (?, ?, ?)",
                [(measurement_id, i, _json(op)) for i, op in enumerate(ops)],
            )
        return measurement_id

    def add_failure(self, config_id: str, platform_id: str, campaign: str, kind: str, reason: str) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO failures (config_id, platform_id, campaign, created_at, kind, reason) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (config_id, platform_id, campaign, time.time(), kind, reason),
            )

    def add_sentinel(
        self, platform_id: str, campaign: str, pass_index: int, sentinel: str, model: str, m: Measurement
    ) -> None:
        """One sentinel reading of a campaign's pass (see ``store.drift``)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO sentinels (platform_id, campaign, pass_index, sentinel, model, "
                "created_at, n, median_ms, low_ms, ci_low_ms, ci_high_ms, cv, contention, samples) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    platform_id,
                    campaign,
                    pass_index,
                    sentinel,
                    model,
                    time.time(),
                    m.n,
                    m.median_ms,
                    m.low_ms,
                    m.ci_low_ms,
                    m.ci_high_ms,
                    m.cv,
                    m.contention,
                    _json(m.samples),
                ),
            )

    # --- reads ------------------------------------------------------------------------------
    def sentinels(self, platform_id: str | None = None) -> pd.DataFrame:
        """Sentinel readings (every pass of every campaign), oldest first; none in a schema-1 store
        opened read-only."""
        if not self._has_table("sentinels"):
            return pd.DataFrame(
                columns=[
                    "platform_id",
                    "campaign",
                    "pass_index",
                    "sentinel",
                    "created_at",
                    "median_ms",
                    "low_ms",
                ]
            )
        query = "SELECT * FROM sentinels"
        arguments: tuple[Any, ...] = ()
        if platform_id is not None:
            query += " WHERE platform_id = ?"
            arguments = (platform_id,)
        return pd.read_sql_query(query + " ORDER BY id", self.db, params=arguments)

    def next_sentinel_pass(self, platform_id: str, campaign: str) -> int:
        """The pass index a (resumed) campaign's next sentinel pass gets."""
        row = self.db.execute(
            "SELECT MAX(pass_index) FROM sentinels WHERE platform_id=? AND campaign=?",
            (platform_id, campaign),
        ).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def drift(self, platform_id: str) -> Drift:
        """The platform's between-session spread from its sentinel readings (``store.drift``)."""
        return estimate(self.sentinels(platform_id))

    def _has_table(self, name: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
        return self.db.execute(query, (name,)).fetchone() is not None

    def done(self, platform_id: str, campaign: str) -> set[str]:
        """Config ids already measured or failed in this campaign on this platform."""
        query = (
            "SELECT config_id FROM measurements WHERE platform_id=? AND campaign=? "
            "UNION SELECT config_id FROM failures WHERE platform_id=? AND campaign=?"
        )
        return {row[0] for row in self.db.execute(query, (platform_id, campaign, platform_id, campaign))}

    def platforms(self) -> pd.DataFrame:
        frame = pd.read_sql_query("SELECT * FROM platforms ORDER BY created_at", self.db)
        for column in ("settings", "fingerprint"):
            frame[column] = frame[column].map(json.loads)
        return frame

    def measurements(self, platform_id: str | None = None, session_ci: bool = True) -> pd.DataFrame:
        """Measurements joined with their config (model string, space, params as JSON text).

        With ``session_ci`` (the default) ``ci_low_ms`` / ``ci_high_ms`` are the session CI, which
        adds the platform's between-session spread to the within-session one (kept in
        ``within_ci_low_ms`` / ``within_ci_high_ms``), with ``session_spread`` and the
        ``contended`` flag and reason (``store.drift``)."""
        query = (
            "SELECT m.*, c.model, c.space, c.params, c.features FROM measurements m "
            "JOIN configs c ON c.id = m.config_id"
        )
        arguments: tuple[Any, ...] = ()
        if platform_id is not None:
            query += " WHERE m.platform_id = ?"
            arguments = (platform_id,)
        frame = pd.read_sql_query(query + " ORDER BY m.id", self.db, params=arguments)
        if not session_ci:
            return frame
        parts = [
            session_intervals(group, self.drift(platform)) for platform, group in frame.groupby("platform_id")
        ]
        if not parts:
            return session_intervals(frame, estimate(pd.DataFrame()))  # no measurements: no rows to widen
        return pd.concat(parts).sort_index()

    def failures(self) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM failures ORDER BY id", self.db)

    def op_measurements(self) -> pd.DataFrame:
        frame = pd.read_sql_query(
            "SELECT o.measurement_id, o.node_index, o.row, m.config_id, m.platform_id FROM op_measurements o "
            "JOIN measurements m ON m.id = o.measurement_id ORDER BY o.id",
            self.db,
        )
        rows = pd.json_normalize(frame.pop("row").map(json.loads).tolist())
        return pd.concat([frame, rows], axis=1)

    def export(self, out: str | Path) -> Path:
        """Measurements to ``.parquet`` or ``.csv``, one flat row each: the statistics, the
        platform's ``backend`` and settings (``setting_<name>``), the config's parameters
        (``param_<name>``) and analytic features (``f_<name>``); raw samples stay JSON text."""
        return write_table(self.flat_measurements(), out)

    def flat_measurements(self) -> pd.DataFrame:
        """``measurements()`` with the JSON columns spread into plain columns (see ``export``)."""
        frame = self.measurements()
        platforms = self.platforms().set_index("id")
        frame.insert(
            frame.columns.get_loc("platform_id") + 1,
            "backend",
            frame["platform_id"].map(platforms["backend"]),
        )
        parts = [frame.drop(columns=["params", "features"])]
        for column, prefix in (("params", "param_"), ("features", "f_")):
            spread = pd.DataFrame.from_records(
                [json.loads(v) if isinstance(v, str) else {} for v in frame[column]], index=frame.index
            )
            parts.append(spread.add_prefix(prefix))
        settings = pd.DataFrame.from_records(
            [platforms.at[p, "settings"] if p in platforms.index else {} for p in frame["platform_id"]],
            index=frame.index,
        )
        parts.append(settings.add_prefix("setting_"))
        return pd.concat(parts, axis=1)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


__all__ = ["SCHEMA_VERSION", "Measurement", "Platform", "Store", "StoreError"]
