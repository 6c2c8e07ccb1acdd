//! A Language as the platform sees it: what its component declares
//! ([`description`]), the conformance lint ([`lint`]), and validation and
//! execution through the component with the guarantees the host enforces
//! ([`validation`], [`execution`]).

pub mod description;
pub mod execution;
pub mod lint;
pub mod validation;

pub use description::LanguageDescription;
