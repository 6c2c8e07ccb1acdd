-- Run records, idempotency keys and promoted programs (PostgreSQL).
-- Times are milliseconds since the Unix epoch.

CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    subject         TEXT NOT NULL,
    language        TEXT NOT NULL,
    session_id      TEXT,
    recorded_level  TEXT NOT NULL,
    record          TEXT NOT NULL,
    bytes           BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT
);
CREATE INDEX runs_by_expiry ON runs (expires_at);
CREATE INDEX runs_by_session ON runs (session_id);
CREATE INDEX runs_by_tenant ON runs (tenant, created_at);

CREATE TABLE idempotency_keys (
    tenant          TEXT NOT NULL,
    subject         TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    runnable_hash   TEXT NOT NULL,
    input_hash      TEXT NOT NULL,
    state           TEXT NOT NULL,
    response        TEXT,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    PRIMARY KEY (tenant, subject, idempotency_key)
);
CREATE INDEX idempotency_by_expiry ON idempotency_keys (expires_at);

CREATE TABLE promoted_programs (
    tenant          TEXT NOT NULL,
    program_ref     TEXT NOT NULL,
    language        TEXT NOT NULL,
    entry           TEXT NOT NULL,
    body            TEXT NOT NULL,
    baseline        TEXT NOT NULL,
    promoter        TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (tenant, program_ref)
);
