-- Language components stored once per content (issue: performance). A
-- component uploaded by many tenants (the same bytes, the same SHA-256) was
-- stored in every tenant's `languages` row and read back, hashed and looked
-- up once per tenant at start-up. Its bytes now live once in `components`,
-- keyed by their SHA-256; `languages` names the version it serves by hash.
CREATE TABLE components (
    sha256  TEXT PRIMARY KEY,
    bytes   BLOB NOT NULL
);

INSERT OR IGNORE INTO components (sha256, bytes) SELECT sha256, component FROM languages;

-- SQLite cannot drop a column that is part of an existing table's layout
-- everywhere it runs; the table is rebuilt without it.
CREATE TABLE languages_by_hash (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    lint        TEXT NOT NULL,
    active      BIGINT NOT NULL DEFAULT 0,
    uploaded_by TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, name, sha256)
);
INSERT INTO languages_by_hash (tenant, name, sha256, lint, active, uploaded_by, created_at)
    SELECT tenant, name, sha256, lint, active, uploaded_by, created_at FROM languages;
DROP TABLE languages;
ALTER TABLE languages_by_hash RENAME TO languages;
CREATE INDEX languages_by_sha256 ON languages (sha256);
