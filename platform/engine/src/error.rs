//! How the engine fails: [`EngineError`] when an engine or a component
//! cannot be made, [`CallError`] when one call into a component does not
//! return normally, classified so the caller picks the spec's channel (a
//! request error during validation, an outcome during execution).

/// Occurs when the engine cannot be created or a component cannot be
/// loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// Occurs when wasmtime rejects the engine configuration.
    #[error("cannot configure the wasm engine: {0}")]
    Config(String),
    /// Occurs when the bytes are not a valid WebAssembly component.
    #[error("not a valid WebAssembly component: {0}")]
    Compile(String),
    /// Occurs when the component imports something the platform does not
    /// grant (a filesystem, sockets, clocks, an unknown interface).
    #[error("the component needs imports the platform does not grant: {0}")]
    Imports(String),
    /// Occurs when `describe` fails or returns something unusable.
    #[error("the component's describe failed: {0}")]
    Describe(String),
    /// Occurs when one call of the component needs more of a pool than the
    /// pool holds in all (`capacity`): it could never run here.
    #[error("the component does not fit this server's capacity: {0}")]
    Capacity(String),
    /// Occurs when the compiled-code cache cannot be read or written.
    #[error("compiled-code cache: {0}")]
    Cache(String),
}

/// Why one call into a component did not return normally.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// Occurs when the call's wall-time budget ran out.
    #[error("the wall-time bound of {0} ms was reached")]
    Timeout(u64),
    /// Occurs when the call's fuel ran out.
    #[error("the step bound (fuel) was exhausted")]
    Fuel,
    /// Occurs when the component tried to grow its memory past the cap.
    #[error("the memory bound of {0} bytes was reached")]
    Memory(u64),
    /// Occurs when the wasm stack overflowed (unbounded recursion).
    #[error("the stack bound was reached (recursion too deep)")]
    Stack,
    /// Occurs when the component's result exceeds the result-size bound.
    #[error("the result is {size} bytes, above the bound of {limit} bytes")]
    ResultTooLarge {
        /// Bytes returned.
        size: u64,
        /// The bound.
        limit: u64,
    },
    /// Occurs when the component trapped (a panic, unreachable, a bad
    /// memory access) for a reason that is not a bound.
    #[error("the component trapped: {0}")]
    Trap(String),
    /// Occurs when the pool the call runs in has no free instance, memory,
    /// table or stack left (the node's capacity, not a bound of the call):
    /// nothing of the component ran. Retryable.
    #[error("the server's capacity for component calls is in use ({0}); nothing ran: retry shortly")]
    Capacity(String),
    /// Occurs when the host itself failed to set up or run the call.
    #[error("host failure: {0}")]
    Host(String),
}

impl CallError {
    /// Whether this failure is a resource bound being reached (as opposed
    /// to a fault of the component or of the host).
    pub(crate) fn is_bound(&self) -> bool {
        matches!(
            self,
            CallError::Timeout(_)
                | CallError::Fuel
                | CallError::Memory(_)
                | CallError::Stack
                | CallError::ResultTooLarge { .. }
        )
    }
}
