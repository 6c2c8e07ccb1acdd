-- Stored run bytes per tenant, kept by triggers (issue: performance). The
-- stored-bytes quota is checked on every retained execute; summing `runs`
-- made that check grow with the runs a tenant keeps. Every insert and delete
-- of a run row updates its tenant's total in the same statement, whichever
-- path deletes it (expiry, session end, tenant removal), on every replica.
CREATE TABLE run_bytes (
    tenant  TEXT PRIMARY KEY,
    bytes   BIGINT NOT NULL
);

INSERT INTO run_bytes (tenant, bytes) SELECT tenant, SUM(bytes) FROM runs GROUP BY tenant;

CREATE FUNCTION runs_track_bytes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO run_bytes (tenant, bytes) VALUES (NEW.tenant, NEW.bytes)
            ON CONFLICT (tenant) DO UPDATE SET bytes = run_bytes.bytes + EXCLUDED.bytes;
    ELSE
        UPDATE run_bytes SET bytes = bytes - OLD.bytes WHERE tenant = OLD.tenant;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_track_bytes AFTER INSERT OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_track_bytes();
