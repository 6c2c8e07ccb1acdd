//! Bearer JWT validation for configured issuers: the signature against the
//! issuer's JWKS (fetched, cached, refreshed when an unknown `kid`
//! appears, in a single flight per issuer that never holds up tokens whose
//! key is known), `iss`, `aud` equal to this resource, `exp`/`nbf` with a small
//! leeway, and a per-issuer allow-list of asymmetric algorithms (never
//! `none`, never HMAC, so an RSA public key can never serve as an HMAC
//! secret).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};

use super::{AuthError, AuthSetupError, Claims, IssuerConfig};

/// The shortest time between two JWKS fetches of one issuer, so unknown
/// `kid`s cannot be used to hammer it.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(5);

/// How long one JWKS fetch may take before it counts as failed.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Keys by `kid`.
type KeyMap = HashMap<String, (DecodingKey, Algorithm)>;

/// One issuer's keys.
///
/// Invariant: no lock a key lookup takes is held across a fetch. `keys` is
/// a synchronous lock held only to read an entry or swap in a fetched set;
/// `refresh` (the single flight, holding when the last fetch started) is
/// held across the fetch, and only requests naming an unknown `kid` wait
/// on it.
struct Issuer {
    config: IssuerConfig,
    algorithms: Vec<Algorithm>,
    keys: std::sync::RwLock<KeyMap>,
    refresh: tokio::sync::Mutex<Option<Instant>>,
}

impl Issuer {
    fn known(&self, kid: &str) -> Option<(DecodingKey, Algorithm)> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).get(kid).cloned()
    }
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
    /// [`AuthSetupError::Algorithms`] naming an issuer with an unusable
    /// algorithm list.
    pub fn new(
        issuers: &[IssuerConfig],
        audience: String,
        leeway: u64,
        http: reqwest::Client,
    ) -> Result<JwtVerifier, AuthSetupError> {
        let mut built = Vec::new();
        for config in issuers {
            let algorithms: Vec<Algorithm> = config.algorithms.iter().filter_map(|a| parse_algorithm(a)).collect();
            if algorithms.is_empty() || algorithms.len() != config.algorithms.len() {
                return Err(AuthSetupError::Algorithms {
                    issuer: config.issuer.clone(),
                    algorithms: config.algorithms.clone(),
                });
            }
            built.push(Issuer {
                config: config.clone(),
                algorithms,
                keys: std::sync::RwLock::new(HashMap::new()),
                refresh: tokio::sync::Mutex::new(None),
            });
        }
        Ok(JwtVerifier { issuers: built, http, audience, leeway })
    }

    /// The configured issuers' identifiers (for the resource metadata).
    pub fn issuers(&self) -> Vec<String> {
        self.issuers.iter().map(|i| i.config.issuer.clone()).collect()
    }

    /// Fetches `issuer`'s JWKS: the keys by `kid`. Called without any lock
    /// the key lookups take.
    async fn fetch(&self, issuer: &Issuer) -> Result<KeyMap, AuthError> {
        let response = self
            .http
            .get(&issuer.config.jwks_url)
            .timeout(FETCH_TIMEOUT)
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
        Ok(keys)
    }

    /// The key `kid` of `issuer`. A known key is answered from the cache
    /// at once, whatever fetch is in flight. An unknown one waits for the
    /// issuer's single refresh: the first waiter fetches (at most once per
    /// [`REFRESH_INTERVAL`]), the others find its keys when it is done.
    async fn key(&self, issuer: &Issuer, kid: &str) -> Result<(DecodingKey, Algorithm), AuthError> {
        if let Some(found) = issuer.known(kid) {
            return Ok(found);
        }
        {
            let mut last_fetch = issuer.refresh.lock().await;
            // The flight this request waited for may have brought the key.
            if let Some(found) = issuer.known(kid) {
                return Ok(found);
            }
            if !last_fetch.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL) {
                *last_fetch = Some(Instant::now());
                let keys = self.fetch(issuer).await?;
                *issuer.keys.write().unwrap_or_else(|p| p.into_inner()) = keys;
            }
        }
        issuer.known(kid).ok_or_else(|| AuthError::Invalid(format!("unknown key id '{kid}'")))
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
