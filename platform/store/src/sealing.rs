//! Tenant secrets (credentials that HTTP bindings reference by name):
//! encrypted at rest with ChaCha20-Poly1305 under a key from the
//! environment (`PILOTAGE_SECRET_KEY`, 64 hex digits), or, for development,
//! a key file in the data folder. Values are never returned by the admin
//! API and never logged; a binding names them as `{secret:NAME}`.

use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

/// The environment variable holding the key.
pub(crate) const KEY_VARIABLE: &str = "PILOTAGE_SECRET_KEY";

/// Encrypts and decrypts secrets.
#[derive(Clone)]
pub struct SecretBox {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

/// Occurs when a secret cannot be sealed or opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// Occurs when the key is not 32 bytes of hex.
    #[error("{KEY_VARIABLE} must be 64 hexadecimal digits")]
    Key,
    /// Occurs when the key file cannot be read or written.
    #[error("secret key file: {0}")]
    File(String),
    /// Occurs when a ciphertext does not open (wrong key or tampering).
    #[error("a stored secret does not decrypt with the configured key")]
    Open,
}

impl SecretBox {
    /// The box for `key` (32 bytes).
    pub fn new(key: [u8; 32]) -> SecretBox {
        SecretBox { cipher: ChaCha20Poly1305::new(&Key::from(key)) }
    }

    /// The key from `PILOTAGE_SECRET_KEY`, else from `data_dir/secret-key`
    /// (created on first use).
    ///
    /// # Errors
    /// [`SecretError`] when the key is malformed or the file unusable.
    pub fn load(data_dir: &Path) -> Result<SecretBox, SecretError> {
        let text = match std::env::var(KEY_VARIABLE) {
            Ok(text) => text,
            Err(_) => {
                let path = data_dir.join("secret-key");
                match std::fs::read_to_string(&path) {
                    Ok(text) => text,
                    Err(_) => {
                        std::fs::create_dir_all(data_dir).map_err(|e| SecretError::File(e.to_string()))?;
                        let text = hex::encode(rand::random::<[u8; 32]>());
                        std::fs::write(&path, &text)
                            .map_err(|e| SecretError::File(format!("{}: {e}", path.display())))?;
                        text
                    }
                }
            }
        };
        let bytes = hex::decode(text.trim()).map_err(|_| SecretError::Key)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| SecretError::Key)?;
        Ok(SecretBox::new(key))
    }

    fn aad(tenant: &str, name: &str) -> Vec<u8> {
        format!("{tenant}\u{0}{name}").into_bytes()
    }

    /// Seals a value for (tenant, name): (nonce, ciphertext). Binding the
    /// ciphertext to its tenant and name stops it from being replayed
    /// under another.
    pub fn seal(&self, tenant: &str, name: &str, value: &str) -> (Vec<u8>, Vec<u8>) {
        let nonce = rand::random::<[u8; 12]>();
        let ciphertext = self
            .cipher
            .encrypt(&Nonce::from(nonce), Payload { msg: value.as_bytes(), aad: &SecretBox::aad(tenant, name) })
            .unwrap_or_default();
        (nonce.to_vec(), ciphertext)
    }

    /// Opens a sealed value.
    ///
    /// # Errors
    /// [`SecretError::Open`] for a wrong key, another (tenant, name) or
    /// tampering.
    pub fn open(&self, tenant: &str, name: &str, nonce: &[u8], ciphertext: &[u8]) -> Result<String, SecretError> {
        let nonce: [u8; 12] = nonce.try_into().map_err(|_| SecretError::Open)?;
        let plain = self
            .cipher
            .decrypt(&Nonce::from(nonce), Payload { msg: ciphertext, aad: &SecretBox::aad(tenant, name) })
            .map_err(|_| SecretError::Open)?;
        String::from_utf8(plain).map_err(|_| SecretError::Open)
    }
}

/// The secret names a binding template references (`{secret:NAME}`).
pub fn referenced(template: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{secret:") {
        let after = &rest[start + 8..];
        let Some(end) = after.find('}') else { break };
        names.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_for_their_tenant_and_name() {
        let secrets = SecretBox::new([7; 32]);
        let (nonce, sealed) = secrets.seal("acme", "stripe", "sk_live_123");
        assert!(!String::from_utf8_lossy(&sealed).contains("sk_live_123"));
        assert_eq!(secrets.open("acme", "stripe", &nonce, &sealed).unwrap(), "sk_live_123");
        assert!(secrets.open("globex", "stripe", &nonce, &sealed).is_err());
        assert!(secrets.open("acme", "other", &nonce, &sealed).is_err());
        assert!(SecretBox::new([8; 32]).open("acme", "stripe", &nonce, &sealed).is_err());
    }

    #[test]
    fn templates_name_their_secrets() {
        assert_eq!(referenced("Bearer {secret:api} and {secret:other}"), ["api", "other"]);
        assert!(referenced("no secrets").is_empty());
    }
}
