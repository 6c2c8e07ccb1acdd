-- A principal is its tenant, its issuer and its subject (OpenID Connect
-- Core §2: `sub` is unique only within its issuer). Every row kept per
-- principal names the issuer beside the subject, and every lookup of such
-- rows matches both. Rows written before this migration name no issuer
-- (''): no credential has that issuer, so they belong to nobody and expire
-- with their own lifetime; a deployment made before keeps firing as its
-- recorded subject.
ALTER TABLE runs ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE deployments ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE mcp_sessions ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
DROP INDEX tasks_by_owner;
CREATE INDEX tasks_by_owner ON tasks (tenant, issuer, subject, created_at);

-- An idempotency key is scoped to its principal (Part II §6.5.6), so the
-- issuer joins its primary key: SQLite cannot change a primary key in
-- place, so the table is rebuilt with its rows.
CREATE TABLE idempotency_keys_by_issuer (
    tenant           TEXT NOT NULL,
    issuer           TEXT NOT NULL DEFAULT '',
    subject          TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    runnable_hash    TEXT NOT NULL,
    input_hash       TEXT NOT NULL,
    state            TEXT NOT NULL,
    response         TEXT,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    run_id           TEXT,
    owner            TEXT,
    lease_expires_at BIGINT,
    PRIMARY KEY (tenant, issuer, subject, idempotency_key)
);
INSERT INTO idempotency_keys_by_issuer
    (tenant, issuer, subject, idempotency_key, runnable_hash, input_hash, state, response, created_at, expires_at,
     run_id, owner, lease_expires_at)
    SELECT tenant, '', subject, idempotency_key, runnable_hash, input_hash, state, response, created_at, expires_at,
           run_id, owner, lease_expires_at
    FROM idempotency_keys;
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_by_issuer RENAME TO idempotency_keys;
CREATE INDEX idempotency_by_expiry ON idempotency_keys (expires_at);

-- An audit record names the kind of credential that acted and its issuer,
-- so a token whose subject is "operator" is never mistaken for the
-- operator token.
ALTER TABLE audit_log ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
