-- A deployment's recent firings: the max_firings_per_minute count and the
-- admin API's latest firings read (tenant, deployment, claimed_at), which
-- the primary key (tenant, deployment, instance) serves only by reading
-- every firing of the deployment kept for seven days (about 600,000 for a
-- per-second schedule).
CREATE INDEX firings_by_deployment ON firings (tenant, deployment, claimed_at);
