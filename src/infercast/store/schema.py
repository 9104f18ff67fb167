"""The store's SQLite schema: its version, its tables, and what a migration adds to an older file."""

import sqlite3

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE platforms (
    id TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    settings TEXT NOT NULL,          -- JSON: threads, opt level, precision, device…
    fingerprint TEXT NOT NULL,       -- JSON: CPU, cores, GPU, driver, OS, library versions
    created_at REAL NOT NULL
);
CREATE TABLE configs (
    id TEXT PRIMARY KEY,
    model TEXT NOT NULL,             -- the model string (space:… for design-space configs)
    space TEXT,
    params TEXT,                     -- JSON
    features TEXT                    -- JSON, analytic features at measurement time
);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY,
    config_id TEXT NOT NULL REFERENCES configs(id),
    platform_id TEXT NOT NULL REFERENCES platforms(id),
    campaign TEXT NOT NULL,
    created_at REAL NOT NULL,
    n INTEGER NOT NULL,
    median_ms REAL NOT NULL,
    mean_ms REAL NOT NULL,
    low_ms REAL NOT NULL,            -- robust low statistic (see measurement.protocol)
    p10_ms REAL NOT NULL,
    p90_ms REAL NOT NULL,
    p99_ms REAL NOT NULL,
    ci_low_ms REAL NOT NULL,
    ci_high_ms REAL NOT NULL,
    cv REAL NOT NULL,
    cap_hit INTEGER NOT NULL,
    contention REAL,
    peak_memory_bytes INTEGER,
    peak_memory_definition TEXT,
    energy_j REAL,
    energy_reason TEXT,              -- why energy_j is NULL
    energy_sensor TEXT,
    samples TEXT NOT NULL,           -- JSON: raw per-round latencies (ms)
    UNIQUE (config_id, platform_id, campaign)
);
CREATE TABLE op_measurements (
    id INTEGER PRIMARY KEY,
    measurement_id INTEGER NOT NULL REFERENCES measurements(id),
    node_index INTEGER NOT NULL,
    row TEXT NOT NULL                -- JSON: op_type, kernel, shapes, flops, latency_ms…
);
CREATE TABLE failures (
    id INTEGER PRIMARY KEY,
    config_id TEXT NOT NULL,
    platform_id TEXT NOT NULL,
    campaign TEXT NOT NULL,
    created_at REAL NOT NULL,
    kind TEXT NOT NULL,              -- error, timeout, out-of-memory, crash
    reason TEXT NOT NULL,
    UNIQUE (config_id, platform_id, campaign)
);
CREATE INDEX measurements_platform ON measurements (platform_id, campaign);
"""
# schema 2 added the sentinels table: a schema-1 store gets it when opened for writing
SENTINELS_TABLE = """
CREATE TABLE IF NOT EXISTS sentinels (
    id INTEGER PRIMARY KEY,
    platform_id TEXT NOT NULL REFERENCES platforms(id),
    campaign TEXT NOT NULL,
    pass_index INTEGER NOT NULL,     -- 0 at the campaign's start, then one per pass (resumed runs go on)
    sentinel TEXT NOT NULL,          -- small, medium, large
    model TEXT NOT NULL,
    created_at REAL NOT NULL,
    n INTEGER NOT NULL,
    median_ms REAL NOT NULL,
    low_ms REAL NOT NULL,
    ci_low_ms REAL NOT NULL,
    ci_high_ms REAL NOT NULL,
    cv REAL NOT NULL,
    contention REAL,
    samples TEXT NOT NULL,
    UNIQUE (platform_id, campaign, pass_index, sentinel)
)"""
TABLES = {"meta", "platforms", "configs", "measurements", "op_measurements", "failures"}


def write_schema(db: sqlite3.Connection) -> None:
    """Create every table of a new store, and its version, in one transaction."""
    db.execute("BEGIN IMMEDIATE")
    for statement in [*SCHEMA.split(";"), SENTINELS_TABLE]:
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    db.execute("INSERT INTO meta VALUES ('created_by', 'infercast')")
    db.execute("COMMIT")
