-- Tenants and what they own: uploaded Language components, catalog
-- entries, encrypted secrets; and the admin audit log (SQLite).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    disabled    BIGINT NOT NULL DEFAULT 0,
    quotas      TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE languages (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    component   BLOB NOT NULL,
    lint        TEXT NOT NULL,
    active      BIGINT NOT NULL DEFAULT 0,
    uploaded_by TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, name, sha256)
);

CREATE TABLE catalog_entries (
    tenant      TEXT NOT NULL,
    id          TEXT NOT NULL,
    stored      TEXT NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE secrets (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    nonce       BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);

CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          BIGINT NOT NULL,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    detail      TEXT NOT NULL
);
