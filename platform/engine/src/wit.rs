//! The generated bindings of the `pilotage:language` WIT package
//! (`guest-sdk/wit`, world `language`; the world `deploying-language` adds
//! the `deploy` export). Every other module converts between these types
//! and the protocol's.

#![allow(missing_docs, clippy::all)]

wasmtime::component::bindgen!({
    path: "../../guest-sdk/wit",
    world: "language",
});
