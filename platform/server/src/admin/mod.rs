//! The operator and language-author API at `/admin/v1` (JSON; OpenAPI at
//! `/admin/v1/openapi.json`): tenants, Language uploads (compiled,
//! described and linted; refused with the findings when the lint finds an
//! error), catalog entries and bulk apply, data sources, secrets, runs,
//! the tenant's policy on risk and its approval requests, what each
//! tenant used per day (`usage`, JSON or CSV), and the audit log; and the approval page at `/approvals/{id}` (`approval_page`),
//! where a human decides a held request.
//!
//! Credentials: the operator token (`--admin-token`), or a bearer token
//! (a JWT in `jwt` mode, a development token in `dev` mode) holding
//! `pilotage:admin` (every tenant) or `pilotage:tenant-admin` (its own
//! tenant), checked from the headers before any body is read
//! ([`admission`]), after the client address's failed credentials
//! (`throttle`: past 10 a minute, 429 until the minute ends); each route's
//! body is bounded. Every request is validated with a 4xx naming the field, every
//! change is audited (who, what, when), and writes are idempotent where
//! they can be.

pub(crate) mod admission;
mod api;
mod approval_page;
mod approvals;
mod catalog;
mod data_sources;
mod deployments;
mod languages;
pub(crate) mod openapi;
mod routes;
mod runs;
mod secrets;
mod tenants;
mod throttle;
mod usage;

pub(crate) use api::{Admin, AdminLimits, AdminState, Credential, audit, credential_until};
pub(crate) use approval_page::{open_from_token as approval_page_open, router as approval_page};
pub(crate) use routes::router;
pub(crate) use throttle::{SignInThrottle, THROTTLED, throttled_page};
