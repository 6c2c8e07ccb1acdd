-- The identity providers an operator trusts for a tenant (JSON: a list of
-- issuers, each {issuer, jwks_url, algorithms?, tenant_from?, tenant_claim?,
-- audience?, admin_audience?, scopes?, access_token_type?}; their tokens act
-- in this tenant only and never grant pilotage:admin). '[]' until then.
ALTER TABLE tenants ADD COLUMN issuers TEXT NOT NULL DEFAULT '[]';
