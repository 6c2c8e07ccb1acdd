-- Programs that deploy: the same tables as migrations/postgres/0008_deployments.sql,
-- which explains them.
CREATE TABLE deployments (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    language    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    subject     TEXT NOT NULL,
    scopes      TEXT NOT NULL,
    body        TEXT NOT NULL,
    context     TEXT,
    triggers    TEXT NOT NULL,
    baseline    TEXT NOT NULL,
    risk        TEXT NOT NULL,
    risk_hints  TEXT NOT NULL,
    enabled     INTEGER NOT NULL,
    run_id      TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    next_due    INTEGER,
    PRIMARY KEY (tenant, name)
);
CREATE INDEX deployments_due ON deployments (next_due) WHERE next_due IS NOT NULL;

CREATE TABLE firings (
    tenant      TEXT NOT NULL,
    deployment  TEXT NOT NULL,
    instance    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    run_id      TEXT NOT NULL,
    owner       TEXT NOT NULL,
    claimed_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, deployment, instance)
);
CREATE INDEX firings_by_time ON firings (claimed_at);

CREATE TABLE deliveries (
    tenant      TEXT NOT NULL,
    source      TEXT NOT NULL,
    signature   TEXT NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, source, signature)
);
CREATE INDEX deliveries_by_time ON deliveries (received_at);
