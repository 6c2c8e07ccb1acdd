//! Development tokens: HS256 JWTs signed with a secret kept in the data
//! folder, issued by `pilotage token mint` for tests and demos. Accepted
//! only in `--auth dev`, which only runs on loopback.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde_json::json;

use super::{AuthError, AuthSetupError, Claims};

use crate::tenancy::DEV_ISSUER;

/// Signs and checks development tokens.
#[derive(Clone)]
pub struct DevTokens {
    secret: Vec<u8>,
    audience: String,
}

impl std::fmt::Debug for DevTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevTokens").field("audience", &self.audience).finish_non_exhaustive()
    }
}

impl DevTokens {
    /// Loads the secret from `data_dir/dev-secret`, creating it when
    /// missing.
    ///
    /// # Errors
    /// [`AuthSetupError::DevSecret`] when the file cannot be read, is not
    /// hex, or cannot be written.
    pub fn load(data_dir: &Path, audience: String) -> Result<DevTokens, AuthSetupError> {
        let path = data_dir.join("dev-secret");
        let unusable = |message: String| AuthSetupError::DevSecret { path: path.clone(), message };
        let secret = match std::fs::read_to_string(&path) {
            Ok(text) => hex::decode(text.trim()).map_err(|e| unusable(e.to_string()))?,
            Err(_) => {
                std::fs::create_dir_all(data_dir).map_err(|e| unusable(e.to_string()))?;
                let secret = rand::random::<[u8; 32]>().to_vec();
                std::fs::write(&path, hex::encode(&secret)).map_err(|e| unusable(e.to_string()))?;
                secret
            }
        };
        Ok(DevTokens { secret, audience })
    }

    /// Issues a token for `tenant`/`subject` with `scopes`, valid for
    /// `ttl_secs`.
    ///
    /// # Errors
    /// [`AuthSetupError::Sign`] when signing fails.
    pub fn mint(
        &self,
        tenant: &str,
        subject: &str,
        scopes: &[String],
        ttl_secs: u64,
    ) -> Result<String, AuthSetupError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let claims = json!({
            "iss": DEV_ISSUER, "aud": self.audience, "sub": subject, "tenant": tenant,
            "scope": scopes.join(" "), "iat": now, "nbf": now, "exp": now + ttl_secs
        });
        let key = EncodingKey::from_secret(&self.secret).map_err(|e| AuthSetupError::Sign(e.to_string()))?;
        encode(&Header::new(Algorithm::HS256), &claims, &key).map_err(|e| AuthSetupError::Sign(e.to_string()))
    }

    /// Checks a development token.
    ///
    /// # Errors
    /// [`AuthError::Invalid`] when it is not a valid development token.
    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&[&self.audience]);
        validation.set_issuer(&[DEV_ISSUER]);
        validation.leeway = 30;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let key = DecodingKey::from_secret(&self.secret).map_err(|e| AuthError::Invalid(e.to_string()))?;
        decode::<Claims>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| AuthError::Invalid(e.to_string()))
    }
}
