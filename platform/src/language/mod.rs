//! A Language as the platform sees it: what its component declares
//! ([`description`]), the conformance lint ([`lint`]), and validation and
//! execution through the component with the guarantees the host enforces
//! ([`validation`], [`execution`]), and the crate template a Language
//! author starts from ([`template`]).

pub mod description;
pub mod execution;
pub mod lint;
pub mod template;
pub mod validation;

pub use description::LanguageDescription;
