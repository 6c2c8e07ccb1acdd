-- Data sources a tenant registered for its Languages (SQLite). The
-- connection URL is a credential: sealed like a secret (nonce, ciphertext).

CREATE TABLE data_sources (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    spec        TEXT NOT NULL,
    nonce       BLOB NOT NULL,
    sealed_url  BLOB NOT NULL,
    updated_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);
