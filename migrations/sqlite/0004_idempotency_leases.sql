-- Idempotency claims that survive a crash (Part II §6.5.6): a claim names
-- the Run it started (`run_id`), its owner (the instance id of the server
-- process running it) and a lease (milliseconds since the Unix epoch) that
-- the owner renews while the Run executes. A claim made before this
-- migration has no lease: no process renews it, so it counts as expired.
ALTER TABLE idempotency_keys ADD COLUMN run_id TEXT;
ALTER TABLE idempotency_keys ADD COLUMN owner TEXT;
ALTER TABLE idempotency_keys ADD COLUMN lease_expires_at BIGINT;
