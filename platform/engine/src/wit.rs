//! The generated bindings of the `pilotage:language` WIT package
//! (`guest-sdk/wit`, world `language`; the world `deploying-language` adds
//! the `deploy` export). Every other module converts between these types
//! and the protocol's. `effects.invoke` and `sql.query` are async on the
//! host (calls are made with `call_async`); every other import is
//! synchronous.

#![allow(missing_docs, clippy::all)]

wasmtime::component::bindgen!({
    path: "../../guest-sdk/wit",
    world: "language",
    // The two imports that wait on the world await on the runtime: a Run
    // waiting on a tenant's upstream is a suspended task, not a thread.
    imports: {
        "pilotage:language/effects.invoke": async,
        "pilotage:language/sql.query": async,
    },
});
