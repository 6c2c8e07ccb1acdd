-- Stored run bytes per tenant, kept by triggers (issue: performance). The
-- stored-bytes quota is checked on every retained execute; summing `runs`
-- made that check grow with the runs a tenant keeps. Every insert and delete
-- of a run row updates its tenant's total in the same statement, whichever
-- path deletes it (expiry, session end, tenant removal).
CREATE TABLE run_bytes (
    tenant  TEXT PRIMARY KEY,
    bytes   BIGINT NOT NULL
);

INSERT INTO run_bytes (tenant, bytes) SELECT tenant, SUM(bytes) FROM runs GROUP BY tenant;

CREATE TRIGGER runs_add_bytes AFTER INSERT ON runs
BEGIN
    INSERT INTO run_bytes (tenant, bytes) VALUES (NEW.tenant, NEW.bytes)
        ON CONFLICT (tenant) DO UPDATE SET bytes = bytes + excluded.bytes;
END;

CREATE TRIGGER runs_remove_bytes AFTER DELETE ON runs
BEGIN
    UPDATE run_bytes SET bytes = bytes - OLD.bytes WHERE tenant = OLD.tenant;
END;
