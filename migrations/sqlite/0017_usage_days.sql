-- What each tenant used, per UTC day (docs/architecture.md, "Usage per
-- tenant"): one row per tenant, day, kind of Run and outcome status, added
-- to by every replica as its Runs end. Runs expire; these rows stay until
-- the tenant is deleted, so an operator can bill and size tenants from
-- them.
CREATE TABLE usage_days (
    tenant TEXT NOT NULL,
    day TEXT NOT NULL,
    kind TEXT NOT NULL,
    outcome TEXT NOT NULL,
    runs BIGINT NOT NULL,
    invocations BIGINT NOT NULL,
    fuel BIGINT NOT NULL,
    wall_time_ms BIGINT NOT NULL,
    stored_bytes BIGINT NOT NULL,
    PRIMARY KEY (tenant, day, kind, outcome)
);
