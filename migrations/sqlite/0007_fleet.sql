-- Replicas on one database (issue: run as a fleet). SQLite serves one
-- process, so nothing is announced here; the tables keep both backends'
-- schemas alike (see migrations/postgres/0007_fleet.sql).
CREATE TABLE tenant_changes (
    seq     INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant  TEXT NOT NULL,
    kind    TEXT NOT NULL,
    name    TEXT NOT NULL,
    origin  TEXT NOT NULL,
    at_ms   INTEGER NOT NULL
);
CREATE INDEX tenant_changes_by_time ON tenant_changes (at_ms);

CREATE TABLE mcp_sessions (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL
);
CREATE INDEX mcp_sessions_by_last_seen ON mcp_sessions (last_seen);
