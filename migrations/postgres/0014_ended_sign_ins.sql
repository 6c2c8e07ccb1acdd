-- Console sessions ended by signing out (docs/architecture.md, "The
-- console and the views"). A session is a sealed cookie the server keeps
-- no copy of; signing out records its nonce here until the session would
-- have expired anyway, and every replica refuses a cookie whose nonce is
-- listed, so a copy of the cookie taken before sign-out opens nothing.
CREATE TABLE ended_sign_ins (
    nonce TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
