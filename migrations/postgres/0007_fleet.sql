-- Replicas on one database (issue: run as a fleet).
--
-- `tenant_changes`: every change to a tenant's state made through one
-- replica (its row, a Language, a catalog entry, a data source, a promoted
-- program) is appended here, and `NOTIFY pilotage_changes` wakes the other
-- replicas, which re-read the named item from its own table. The log is the
-- catch-up after a lost LISTEN connection; rows older than a day are pruned.
CREATE TABLE tenant_changes (
    seq     BIGSERIAL PRIMARY KEY,
    tenant  TEXT NOT NULL,
    kind    TEXT NOT NULL,
    name    TEXT NOT NULL,
    origin  TEXT NOT NULL,
    at_ms   BIGINT NOT NULL
);
CREATE INDEX tenant_changes_by_time ON tenant_changes (at_ms);

-- `mcp_sessions`: each MCP session's `initialize` parameters and owner, so
-- a replica that does not hold a session restores it (rmcp's session
-- store), and `last_seen` (refreshed by every replica that serves it, at
-- most every few seconds) tells when the session idled out fleet-wide.
CREATE TABLE mcp_sessions (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    state       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    last_seen   BIGINT NOT NULL
);
CREATE INDEX mcp_sessions_by_last_seen ON mcp_sessions (last_seen);
