-- Programs that deploy (Part II §6.5.7): the platform owns triggers,
-- storage and firing (docs/architecture.md "Deployments").
--
-- `deployments`: one row per (tenant, name); deploying the same name again
-- replaces the row and bumps `version`. The deploying principal (subject,
-- scopes) is recorded: every firing runs as it. `baseline` holds, per
-- referenced catalog entry, what the body was validated against; a firing
-- whose entries changed or vanished does not run. `next_due` is the next
-- schedule tick (ms since the Unix epoch; NULL without a schedule or when
-- disabled), indexed so finding due deployments costs what is due, not
-- what is installed.
CREATE TABLE deployments (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    language    TEXT NOT NULL,
    version     BIGINT NOT NULL,
    subject     TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    body        TEXT NOT NULL,
    context     TEXT,
    triggers    TEXT NOT NULL,
    baseline    TEXT NOT NULL,
    risk        TEXT NOT NULL,
    risk_hints  TEXT NOT NULL,
    enabled     BIGINT NOT NULL,
    run_id      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    next_due    BIGINT,
    PRIMARY KEY (tenant, name)
);
CREATE INDEX deployments_due ON deployments (next_due) WHERE next_due IS NOT NULL;

-- `firings`: one row per trigger instance of a deployment (a schedule
-- tick, a webhook delivery, an MQTT message). The primary key is the claim:
-- whichever replica inserts it fires, so an instance fires once fleet-wide.
CREATE TABLE firings (
    tenant      TEXT NOT NULL,
    deployment  TEXT NOT NULL,
    instance    TEXT NOT NULL,
    version     BIGINT NOT NULL,
    run_id      TEXT NOT NULL,
    owner       TEXT NOT NULL,
    claimed_at  BIGINT NOT NULL,
    PRIMARY KEY (tenant, deployment, instance)
);
CREATE INDEX firings_by_time ON firings (claimed_at);

-- `deliveries`: webhook deliveries seen (per tenant and source, by their
-- signature) within the replay window, so a replayed delivery is refused.
CREATE TABLE deliveries (
    tenant      TEXT NOT NULL,
    source      TEXT NOT NULL,
    signature   TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, source, signature)
);
CREATE INDEX deliveries_by_time ON deliveries (received_at);
