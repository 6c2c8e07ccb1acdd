//! Bearer JWT validation for configured issuers: the signature against the
//! issuer's JWKS (fetched, cached, refreshed when an unknown `kid`
//! appears), `iss`, `aud` equal to this resource, `exp`/`nbf` with a small
//! leeway, and a per-issuer allow-list of asymmetric algorithms (never
//! `none`, never HMAC, so an RSA public key can never serve as an HMAC
//! secret).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use tokio::sync::RwLock;

use super::{AuthError, Claims, IssuerConfig};

/// The shortest time between two JWKS fetches of one issuer, so unknown
/// `kid`s cannot be used to hammer it.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// Keys by `kid`, and when they were last fetched.
type KeySet = (HashMap<String, (DecodingKey, Algorithm)>, Option<Instant>);

/// One issuer's keys.
struct Issuer {
    config: IssuerConfig,
    algorithms: Vec<Algorithm>,
    keys: RwLock<KeySet>,
}

/// Validates bearer tokens of the configured issuers.
pub struct JwtVerifier {
    issuers: Vec<Issuer>,
    http: reqwest::Client,
    audience: String,
    leeway: u64,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier").field("audience", &self.audience).finish_non_exhaustive()
    }
}

fn parse_algorithm(name: &str) -> Option<Algorithm> {
    match name {
        "RS256" => Some(Algorithm::RS256),
        "RS384" => Some(Algorithm::RS384),
        "RS512" => Some(Algorithm::RS512),
        "PS256" => Some(Algorithm::PS256),
        "PS384" => Some(Algorithm::PS384),
        "PS512" => Some(Algorithm::PS512),
        "ES256" => Some(Algorithm::ES256),
        "ES384" => Some(Algorithm::ES384),
        "EdDSA" => Some(Algorithm::EdDSA),
        // HMAC algorithms are never accepted from an issuer.
        _ => None,
    }
}

impl JwtVerifier {
    /// A verifier for `issuers`, accepting tokens whose audience is
    /// `audience`.
    ///
    /// # Errors
    /// A message naming an issuer with an unusable algorithm list.
    pub fn new(
        issuers: &[IssuerConfig],
        audience: String,
        leeway: u64,
        http: reqwest::Client,
    ) -> Result<JwtVerifier, String> {
        let mut built = Vec::new();
        for config in issuers {
            let algorithms: Vec<Algorithm> = config.algorithms.iter().filter_map(|a| parse_algorithm(a)).collect();
            if algorithms.is_empty() || algorithms.len() != config.algorithms.len() {
                return Err(format!(
                    "issuer {}: algorithms {:?} must be asymmetric ones (RS256, ES256, PS256, EdDSA, …)",
                    config.issuer, config.algorithms
                ));
            }
            built.push(Issuer { config: config.clone(), algorithms, keys: RwLock::new((HashMap::new(), None)) });
        }
        Ok(JwtVerifier { issuers: built, http, audience, leeway })
    }

    /// The configured issuers' identifiers (for the resource metadata).
    pub fn issuers(&self) -> Vec<String> {
        self.issuers.iter().map(|i| i.config.issuer.clone()).collect()
    }

    async fn fetch(&self, issuer: &Issuer) -> Result<(), AuthError> {
        let mut guard = issuer.keys.write().await;
        if guard.1.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL) {
            return Ok(());
        }
        guard.1 = Some(Instant::now());
        let response = self
            .http
            .get(&issuer.config.jwks_url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| AuthError::Invalid(format!("the issuer's keys are unreachable: {e}")))?;
        let set: JwkSet =
            response.json().await.map_err(|e| AuthError::Invalid(format!("the issuer's JWKS does not parse: {e}")))?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            let Some(kid) = jwk.common.key_id.clone() else { continue };
            let family = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                AlgorithmParameters::OctetKeyPair(_) => Algorithm::EdDSA,
                // Symmetric keys (and kinds this build does not know) are
                // never trusted from a JWKS.
                _ => continue,
            };
            if let Ok(key) = DecodingKey::from_jwk(jwk) {
                keys.insert(kid, (key, family));
            }
        }
        guard.0 = keys;
        Ok(())
    }

    async fn key(&self, issuer: &Issuer, kid: &str) -> Result<(DecodingKey, Algorithm), AuthError> {
        if let Some(found) = issuer.keys.read().await.0.get(kid).cloned() {
            return Ok(found);
        }
        self.fetch(issuer).await?;
        issuer
            .keys
            .read()
            .await
            .0
            .get(kid)
            .cloned()
            .ok_or_else(|| AuthError::Invalid(format!("unknown key id '{kid}'")))
    }

    /// Validates `token` and returns its claims.
    ///
    /// # Errors
    /// [`AuthError::Invalid`] naming the first check that failed.
    pub async fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        let header = decode_header(token).map_err(|e| AuthError::Invalid(format!("malformed token: {e}")))?;
        let unverified: Claims = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|e| AuthError::Invalid(format!("malformed claims: {e}")))?;
        let iss = unverified.iss.as_deref().ok_or_else(|| AuthError::Invalid("no issuer".into()))?;
        let issuer = self
            .issuers
            .iter()
            .find(|i| i.config.issuer == iss)
            .ok_or_else(|| AuthError::Invalid(format!("untrusted issuer '{iss}'")))?;
        if !issuer.algorithms.contains(&header.alg) {
            return Err(AuthError::Invalid(format!("algorithm {:?} is not allowed for this issuer", header.alg)));
        }
        let kid = header.kid.as_deref().ok_or_else(|| AuthError::Invalid("the token names no key (kid)".into()))?;
        let (key, family) = self.key(issuer, kid).await?;
        let compatible = match family {
            Algorithm::RS256 => matches!(
                header.alg,
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ),
            Algorithm::ES256 => matches!(header.alg, Algorithm::ES256 | Algorithm::ES384),
            other => header.alg == other,
        };
        if !compatible {
            return Err(AuthError::Invalid(format!("algorithm {:?} does not match the key's type", header.alg)));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&[&self.audience]);
        validation.set_issuer(&[iss]);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = decode::<Claims>(token, &key, &validation).map_err(|e| AuthError::Invalid(e.to_string()))?;
        Ok(data.claims)
    }
}

/// A shared verifier.
pub type SharedVerifier = Arc<JwtVerifier>;
