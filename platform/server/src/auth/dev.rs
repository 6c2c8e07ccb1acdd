//! Development tokens: HS256 JWTs signed with a secret kept in the data
//! folder, issued by `pilotage token mint` for tests and demos. Accepted
//! only in `--auth dev`, which only runs on loopback. As with an issuer's
//! tokens, the admin side is a resource of its own: a token holding an
//! admin-side scope is minted for `<public url>/admin/v1`, any other for
//! `<public url>/mcp`, and neither is accepted by the other.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation, decode, encode};
use serde_json::json;

use super::{ADMIN_SIDE_SCOPES, AuthError, AuthSetupError, Claims, Resource, tenant_resource};

use crate::tenancy::DEV_ISSUER;

/// Signs and checks development tokens.
#[derive(Clone)]
pub struct DevTokens {
    secret: Vec<u8>,
    /// The MCP resource, `<public url>/mcp`.
    audience: String,
    /// The admin API's resource, `<public url>/admin/v1`.
    admin_audience: String,
}

impl std::fmt::Debug for DevTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevTokens").field("audience", &self.audience).finish_non_exhaustive()
    }
}

impl DevTokens {
    /// Loads the secret from `data_dir/dev-secret`, creating it when
    /// missing, for tokens of the MCP resource `audience`
    /// (`<public url>/mcp`) and of the admin API beside it.
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
        let public_url = audience.strip_suffix("/mcp").unwrap_or(&audience).to_owned();
        Ok(DevTokens { secret, admin_audience: super::admin_resource(&public_url), audience })
    }

    /// Loads the secret a server already keeps in `data_dir/dev-secret`,
    /// never creating one: a token signed with a secret no server holds
    /// would be refused by every server, so a minting tool asks for the
    /// server's own folder instead (`pilotage token mint`).
    ///
    /// # Errors
    /// [`AuthSetupError::DevSecret`] when `data_dir` holds no secret (the
    /// message says which folder a server uses), or as [`DevTokens::load`].
    pub fn open(data_dir: &Path, audience: String) -> Result<DevTokens, AuthSetupError> {
        let path = data_dir.join("dev-secret");
        if !path.is_file() {
            return Err(AuthSetupError::DevSecret {
                path,
                message: "no development secret here, so no server would accept a token minted now. A server \
                          running `--auth dev` creates it in its data folder when it starts: start that server \
                          first, or name its folder with --data-dir (PILOTAGE_DATA_DIR)"
                    .to_owned(),
            });
        }
        DevTokens::load(data_dir, audience)
    }

    /// Issues a token for `tenant`/`subject` with `scopes`, valid for
    /// `ttl_secs`: for the admin API when `scopes` are admin-side ones, for
    /// the MCP resource otherwise.
    ///
    /// # Errors
    /// [`AuthSetupError::Sign`] when signing fails, or when `scopes` mix an
    /// admin-side scope with others (one token per resource).
    pub fn mint(
        &self,
        tenant: &str,
        subject: &str,
        scopes: &[String],
        ttl_secs: u64,
    ) -> Result<String, AuthSetupError> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let admin_side = scopes.iter().filter(|s| ADMIN_SIDE_SCOPES.contains(&s.as_str())).count();
        let audience = match admin_side {
            0 => &self.audience,
            n if n == scopes.len() => &self.admin_audience,
            _ => {
                return Err(AuthSetupError::Sign(format!(
                    "a token is for agents or for the admin side ({}), not both: mint one of each",
                    ADMIN_SIDE_SCOPES.join(", ")
                )));
            }
        };
        let claims = json!({
            "iss": DEV_ISSUER, "aud": audience, "sub": subject, "tenant": tenant,
            "scope": scopes.join(" "), "iat": now, "nbf": now, "exp": now + ttl_secs
        });
        let key = EncodingKey::from_secret(&self.secret).map_err(|e| AuthSetupError::Sign(e.to_string()))?;
        encode(&Header::new(Algorithm::HS256), &claims, &key).map_err(|e| AuthSetupError::Sign(e.to_string()))
    }

    /// Checks a development token presented to `resource`.
    ///
    /// # Errors
    /// [`AuthError::Invalid`] when it is not a valid development token for
    /// that resource.
    pub fn verify(&self, token: &str, resource: Resource<'_>) -> Result<Claims, AuthError> {
        let audiences = match resource {
            Resource::Admin => vec![self.admin_audience.clone()],
            Resource::Mcp { path_tenant } => {
                let public_url = self.audience.strip_suffix("/mcp").unwrap_or(&self.audience);
                let mut audiences = vec![self.audience.clone()];
                audiences.extend(path_tenant.map(|tenant| tenant_resource(public_url, tenant)));
                audiences
            }
        };
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(&audiences);
        validation.set_issuer(&[DEV_ISSUER]);
        validation.leeway = 30;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let key = DecodingKey::from_secret(&self.secret).map_err(|e| AuthError::Invalid(e.to_string()))?;
        decode::<Claims>(token, &key, &validation).map(|data| data.claims).map_err(|e| AuthError::Invalid(refusal(&e)))
    }
}

/// Why a development token is refused, in words (jsonwebtoken's own
/// display names its error kinds, `InvalidToken`).
fn refusal(error: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Json(_) | ErrorKind::Utf8(_) => {
            "not a JWT".to_owned()
        }
        ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => {
            "not signed with this server's development secret (mint it with --data-dir of this server)".to_owned()
        }
        ErrorKind::ExpiredSignature => "expired".to_owned(),
        ErrorKind::ImmatureSignature => "not valid yet".to_owned(),
        ErrorKind::InvalidAudience => "issued for another resource or server (see --public-url)".to_owned(),
        ErrorKind::InvalidIssuer => "not a development token".to_owned(),
        _ => error.to_string(),
    }
}
