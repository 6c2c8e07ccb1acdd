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
-- issuer joins its primary key.
ALTER TABLE idempotency_keys ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (tenant, issuer, subject, idempotency_key);

-- An audit record names the kind of credential that acted and its issuer,
-- so a token whose subject is "operator" is never mistaken for the
-- operator token.
ALTER TABLE audit_log ADD COLUMN credential TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_log ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
