-- The console's Run list filters by outcome status (docs/architecture.md,
-- "The console and the views"): the status is kept beside the record so
-- a listing never reads the records themselves (up to 660 KB each).
-- Records stored before this migration get theirs from the record.
ALTER TABLE runs ADD COLUMN status TEXT;
UPDATE runs SET status = (record::jsonb) -> 'outcome' ->> 'status';
CREATE INDEX runs_by_tenant_status ON runs (tenant, status, created_at);
-- The Run page names the firing that started a Run.
CREATE INDEX firings_by_run ON firings (run_id);
