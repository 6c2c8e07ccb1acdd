//! The compiled-code cache: compiled components on disk, keyed by
//! (component SHA-256, wasmtime version, engine configuration), so a
//! restart recompiles nothing.
//!
//! Only artifacts this host wrote are ever loaded: the file name carries
//! the key, and the file is written atomically (temporary file, then
//! rename) in a directory the platform owns. wasmtime additionally checks
//! that an artifact matches the engine it is loaded into.

use std::hash::{Hash, Hasher};
use std::path::Path;

use wasmtime::component::Component;

use crate::error::EngineError;

/// The wasmtime version compiled into this binary.
pub(crate) const WASMTIME_VERSION: &str = "48.0.10";

/// A stable key for the engine's compilation settings (fuel, epochs,
/// stack, target…): wasmtime's own compatibility hash, folded with FNV-1a
/// so it is stable across Rust releases.
pub fn config_key(engine: &wasmtime::Engine) -> String {
    struct Fnv(u64);
    impl Hasher for Fnv {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for byte in bytes {
                self.0 ^= u64::from(*byte);
                self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    let mut hasher = Fnv(0xcbf2_9ce4_8422_2325);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// The artifact file name for a component.
pub fn artifact_name(sha256: &str, config_key: &str) -> String {
    format!("{sha256}-wasmtime{WASMTIME_VERSION}-{config_key}.cwasm")
}

/// Loads the compiled component from `cache_dir` when present, else
/// compiles `bytes` and stores the artifact. Returns the component and
/// whether it came from the cache. A corrupt or incompatible artifact is
/// replaced, never trusted.
///
/// # Errors
/// [`EngineError::Compile`] when the bytes do not compile.
pub(crate) fn load_or_compile(
    engine: &wasmtime::Engine,
    cache_dir: Option<&Path>,
    config_key: &str,
    sha256: &str,
    bytes: &[u8],
) -> Result<(Component, bool), EngineError> {
    let Some(dir) = cache_dir else {
        return compile(engine, bytes).map(|component| (component, false));
    };
    let path = dir.join(artifact_name(sha256, config_key));
    if path.is_file() {
        match deserialize(engine, &path) {
            Ok(component) => return Ok((component, true)),
            Err(error) => tracing::warn!(path = %path.display(), %error, "discarding an unusable compiled artifact"),
        }
    }
    let component = compile(engine, bytes)?;
    if let Err(error) = store(&component, dir, &path) {
        tracing::warn!(path = %path.display(), %error, "cannot write the compiled-code cache");
    }
    Ok((component, false))
}

/// The code `compiled` (made for another engine with the same compilation
/// settings) loaded into `engine`: from the cache file when there is one,
/// else from `compiled`'s serialized form; compiled again from `bytes`
/// only when `engine` refuses both (its settings differ after all).
///
/// # Errors
/// [`EngineError::Compile`] when the bytes do not compile.
pub(crate) fn load_into(
    engine: &wasmtime::Engine,
    compiled: &Component,
    cache_dir: Option<&Path>,
    config_key: &str,
    sha256: &str,
    bytes: &[u8],
) -> Result<Component, EngineError> {
    if let Some(dir) = cache_dir {
        let path = dir.join(artifact_name(sha256, config_key));
        if path.is_file()
            && let Ok(component) = deserialize(engine, &path)
        {
            return Ok(component);
        }
    }
    let moved = compiled
        .serialize()
        .map_err(|e| EngineError::Cache(format!("{e:#}")))
        .and_then(|artifact| deserialize_bytes(engine, &artifact));
    match moved {
        Ok(component) => Ok(component),
        Err(error) => {
            tracing::warn!(%error, "the execution engine refused the compiled code; compiling it again");
            compile(engine, bytes)
        }
    }
}

fn compile(engine: &wasmtime::Engine, bytes: &[u8]) -> Result<Component, EngineError> {
    if let Some(reason) = not_a_component(bytes) {
        return Err(EngineError::Compile(reason.to_owned()));
    }
    Component::new(engine, bytes).map_err(|e| EngineError::Compile(format!("{e:#}")))
}

/// Why `bytes` cannot be a component, from their preamble alone, in words
/// a person uploading the wrong file understands (wasmtime's own message
/// shows the expected and actual header bytes as arrays).
fn not_a_component(bytes: &[u8]) -> Option<&'static str> {
    // A binary starts with `\0asm`, then a version and a layer: 1, 0 for a
    // core module; 0x0d, 1 for a component (the component model's binary
    // format).
    if !bytes.starts_with(b"\0asm") {
        return Some(
            "the file is not WebAssembly (it does not begin with \\0asm): upload the .wasm component a Language's \
             build produces",
        );
    }
    match bytes.get(4..8) {
        Some([1, 0, 0, 0]) => Some(
            "the file is a core WebAssembly module, not a component: build the Language for wasm32-wasip2 (or \
             wrap the module with `wasm-tools component new`)",
        ),
        _ => None,
    }
}

#[allow(unsafe_code)]
fn deserialize(engine: &wasmtime::Engine, path: &Path) -> Result<Component, EngineError> {
    // SAFETY: `deserialize_file` trusts its input to be wasmtime's own
    // output. The cache directory is private to the platform, files are
    // named by the SHA-256 of the source bytes plus the wasmtime version
    // and engine settings, and they are only ever written by `store` below
    // (atomically), so the file is an artifact this host produced for this
    // engine. wasmtime also rejects artifacts from another version or
    // configuration.
    unsafe { Component::deserialize_file(engine, path) }.map_err(|e| EngineError::Cache(format!("{e:#}")))
}

#[allow(unsafe_code)]
fn deserialize_bytes(engine: &wasmtime::Engine, artifact: &[u8]) -> Result<Component, EngineError> {
    // SAFETY: `artifact` is what `Component::serialize` produced a moment
    // ago in this process, from code this host compiled (or read from its
    // own cache, as in `deserialize`); wasmtime also rejects an artifact
    // whose engine settings differ from `engine`'s.
    unsafe { Component::deserialize(engine, artifact) }.map_err(|e| EngineError::Cache(format!("{e:#}")))
}

fn store(component: &Component, dir: &Path, path: &Path) -> Result<(), EngineError> {
    std::fs::create_dir_all(dir).map_err(|e| EngineError::Cache(e.to_string()))?;
    let artifact = component.serialize().map_err(|e| EngineError::Cache(format!("{e:#}")))?;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, artifact).map_err(|e| EngineError::Cache(e.to_string()))?;
    std::fs::rename(&temporary, path).map_err(|e| EngineError::Cache(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::not_a_component;

    #[test]
    fn the_wrong_file_is_named_in_words() {
        assert!(not_a_component(b"hello, world").unwrap().contains("not WebAssembly"));
        assert!(not_a_component(b"\0asm\x01\0\0\0").unwrap().contains("core WebAssembly module"));
        assert_eq!(not_a_component(b"\0asm\x0d\0\x01\0"), None);
    }
}
