-- A tenant's policy on risk (Part II §7.3 enforced by the platform):
-- rules mapping a plan's risk to allow, approve or deny, and budgets; JSON
-- (pilotage_server::policy::Policy), '{}' is today's behaviour.
ALTER TABLE tenants ADD COLUMN policy TEXT NOT NULL DEFAULT '{}';

-- Approval requests: one execute held by the policy until a human decides.
-- `binding` is the digest of everything the approval is for (tenant,
-- subject, Language, program, input, context, mode, test run, catalog
-- version); `request` is what the approver is shown (JSON). `state`:
-- pending, approved, rejected, used. An approval is past its time when
-- now >= expires_at, whatever its state says.
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL,
    language TEXT NOT NULL,
    binding TEXT NOT NULL,
    request TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    decided_by TEXT,
    decided_at INTEGER,
    decided_from TEXT,
    used_by_run TEXT
);
CREATE INDEX approvals_by_binding ON approvals (tenant, binding);
CREATE INDEX approvals_by_tenant ON approvals (tenant, created_at);

-- Budgets: Runs taken in a fixed window, per tenant and holder (a subject,
-- or '*' for the whole tenant) and budget (its index and risk in the
-- policy). A Run takes one unit by a conditional increment.
CREATE TABLE budget_uses (
    tenant TEXT NOT NULL,
    holder TEXT NOT NULL,
    budget TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (tenant, holder, budget, window_start)
);
