-- Assertions (x-assertions, docs/assertions.md) a deployment keeps and
-- evaluates on every firing: the JSON array the deploy request carried;
-- NULL when it carried none.
ALTER TABLE deployments ADD COLUMN assertions TEXT;
