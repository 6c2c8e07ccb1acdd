-- Language components stored once per content (issue: performance). A
-- component uploaded by many tenants (the same bytes, the same SHA-256) was
-- stored in every tenant's `languages` row and read back, hashed and looked
-- up once per tenant at start-up. Its bytes now live once in `components`,
-- keyed by their SHA-256; `languages` names the version it serves by hash.
CREATE TABLE components (
    sha256  TEXT PRIMARY KEY,
    bytes   BYTEA NOT NULL
);

INSERT INTO components (sha256, bytes)
    SELECT DISTINCT ON (sha256) sha256, component FROM languages
    ON CONFLICT (sha256) DO NOTHING;

ALTER TABLE languages DROP COLUMN component;
CREATE INDEX languages_by_sha256 ON languages (sha256);
