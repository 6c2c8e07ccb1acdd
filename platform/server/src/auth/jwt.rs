//! Bearer JWT validation for configured issuers: the signature against the
//! issuer's JWKS (fetched, cached, refreshed when an unknown `kid`
//! appears, in a single flight per issuer that never holds up tokens whose
//! key is known), `iss`, `aud` naming the resource the token is presented
//! to (the MCP resource, a tenant's `/t/{tenant}/mcp`, or the admin API,
//! each its own audience so an agent's token never reaches the admin
//! API), `exp`/`nbf` with a small leeway, `typ` where the issuer is marked
//! as issuing RFC 9068 access tokens, and a per-issuer allow-list of
//! asymmetric algorithms (never `none`, never HMAC, so an RSA public key
//! can never serve as an HMAC secret).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};

use crate::tenancy::Platform;

use super::{ADMIN_SCOPE, AuthError, AuthSetupError, Claims, IssuerConfig, Resource, admin_resource, tenant_resource};

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
    config: Arc<IssuerConfig>,
    algorithms: Vec<Algorithm>,
    keys: std::sync::RwLock<KeyMap>,
    refresh: tokio::sync::Mutex<Option<Instant>>,
}

impl Issuer {
    fn known(&self, kid: &str) -> Option<(DecodingKey, Algorithm)> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).get(kid).cloned()
    }
}

/// Validates bearer tokens of the configured issuers: the settings' ones,
/// then those an operator stored with tenants (read from the platform at
/// each token, so a change applies at once on every replica that applied
/// the tenant's row).
pub struct JwtVerifier {
    issuers: Vec<Arc<Issuer>>,
    /// Where the tenants' stored issuers are indexed.
    platform: Option<Platform>,
    /// The stored issuers' keys, by `iss`, kept while their configuration
    /// is unchanged.
    stored: std::sync::Mutex<HashMap<String, Arc<Issuer>>>,
    http: reqwest::Client,
    /// The public URL the resources' identifiers are formed under.
    public_url: String,
    leeway: u64,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier").field("public_url", &self.public_url).finish_non_exhaustive()
    }
}

/// A token that passed every check, and the issuer that signed it.
#[derive(Clone, Debug)]
pub struct Verified {
    /// Its claims, scopes cut to what the issuer may grant.
    pub claims: Claims,
    /// Its issuer's configuration (which tenants, how named).
    pub issuer: Arc<IssuerConfig>,
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

impl Issuer {
    /// The issuer of `config`, with no key fetched yet.
    fn build(config: Arc<IssuerConfig>) -> Result<Issuer, AuthSetupError> {
        let algorithms: Vec<Algorithm> = config.algorithms.iter().filter_map(|a| parse_algorithm(a)).collect();
        if algorithms.is_empty() || algorithms.len() != config.algorithms.len() {
            return Err(AuthSetupError::Algorithms {
                issuer: config.issuer.clone(),
                algorithms: config.algorithms.clone(),
            });
        }
        Ok(Issuer {
            config,
            algorithms,
            keys: std::sync::RwLock::new(HashMap::new()),
            refresh: tokio::sync::Mutex::new(None),
        })
    }
}

/// Checks that `config` could be used: its algorithms are asymmetric ones
/// this build knows.
///
/// # Errors
/// [`AuthSetupError::Algorithms`] otherwise.
pub fn check_issuer(config: &IssuerConfig) -> Result<(), AuthSetupError> {
    Issuer::build(Arc::new(config.clone())).map(|_| ())
}

impl JwtVerifier {
    /// A verifier for `issuers`, for the resources under `public_url`
    /// (`<public url>/mcp`, `<public url>/t/{tenant}/mcp`,
    /// `<public url>/admin/v1`, or an issuer's own audiences).
    ///
    /// # Errors
    /// [`AuthSetupError::Algorithms`] naming an issuer with an unusable
    /// algorithm list.
    pub fn new(
        issuers: &[IssuerConfig],
        public_url: &str,
        leeway: u64,
        http: reqwest::Client,
    ) -> Result<JwtVerifier, AuthSetupError> {
        let mut built = Vec::new();
        for config in issuers {
            built.push(Arc::new(Issuer::build(Arc::new(config.clone()))?));
        }
        Ok(JwtVerifier {
            issuers: built,
            platform: None,
            stored: std::sync::Mutex::new(HashMap::new()),
            http,
            public_url: public_url.trim_end_matches('/').to_owned(),
            leeway,
        })
    }

    /// The same verifier, also trusting the issuers `platform`'s tenants
    /// store (after the settings' ones, which a stored one never replaces).
    pub fn with_stored_issuers(mut self, platform: Platform) -> JwtVerifier {
        self.platform = Some(platform);
        self
    }

    /// The issuer named `iss`: a settings one, else a tenant's stored one.
    fn issuer(&self, iss: &str) -> Option<Arc<Issuer>> {
        if let Some(found) = self.issuers.iter().find(|i| i.config.issuer == iss) {
            return Some(found.clone());
        }
        let index = self.platform.as_ref()?.stored_issuers();
        let config = index.get(iss)?;
        let mut stored = self.stored.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = stored.get(iss).filter(|held| held.config == config) {
            return Some(held.clone());
        }
        match Issuer::build(config) {
            Ok(built) => {
                let built = Arc::new(built);
                stored.retain(|name, _| index.get(name).is_some());
                stored.insert(iss.to_owned(), built.clone());
                Some(built)
            }
            Err(error) => {
                tracing::error!(%error, "a stored issuer cannot be used");
                None
            }
        }
    }

    /// Every trusted issuer's configuration: the settings' ones, then the
    /// tenants' stored ones.
    fn configs(&self) -> Vec<Arc<IssuerConfig>> {
        let mut configs: Vec<Arc<IssuerConfig>> = self.issuers.iter().map(|i| i.config.clone()).collect();
        if let Some(platform) = &self.platform {
            let index = platform.stored_issuers();
            configs.extend(index.all().filter(|c| !self.issuers.iter().any(|i| i.config.issuer == c.issuer)).cloned());
        }
        configs
    }

    /// The trusted issuers' identifiers (for the resource metadata).
    pub fn issuers(&self) -> Vec<String> {
        self.configs().iter().map(|c| c.issuer.clone()).collect()
    }

    /// The identifiers of the issuers whose tokens may act in `tenant`.
    pub fn issuers_of(&self, tenant: &str) -> Vec<String> {
        self.configs().iter().filter(|c| c.serves(tenant)).map(|c| c.issuer.clone()).collect()
    }

    /// The audiences `issuer`'s tokens may carry for `resource`.
    fn audiences(&self, issuer: &IssuerConfig, resource: Resource<'_>) -> Vec<String> {
        match resource {
            Resource::Admin => {
                vec![issuer.admin_audience.clone().unwrap_or_else(|| admin_resource(&self.public_url))]
            }
            Resource::Mcp { path_tenant } => {
                let mut audiences = vec![issuer.audience.clone().unwrap_or_else(|| format!("{}/mcp", self.public_url))];
                if let Some(tenant) = path_tenant {
                    audiences.push(tenant_resource(&self.public_url, tenant));
                }
                audiences
            }
        }
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

    /// Validates `token`, presented to `resource`, and returns its claims
    /// with its issuer.
    ///
    /// # Errors
    /// [`AuthError::Invalid`] naming the first check that failed.
    pub async fn verify(&self, token: &str, resource: Resource<'_>) -> Result<Verified, AuthError> {
        let header = decode_header(token).map_err(|e| AuthError::Invalid(format!("malformed token: {e}")))?;
        let unverified: Claims = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|e| AuthError::Invalid(format!("malformed claims: {e}")))?;
        let iss = unverified.iss.as_deref().ok_or_else(|| AuthError::Invalid("no issuer".into()))?;
        let issuer = self.issuer(iss).ok_or_else(|| AuthError::Invalid(format!("untrusted issuer '{iss}'")))?;
        if issuer.config.access_token_type
            && !header
                .typ
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("at+jwt") || t.eq_ignore_ascii_case("application/at+jwt"))
        {
            return Err(AuthError::Invalid(format!(
                "this issuer's access tokens have the type at+jwt (RFC 9068); this one has {:?}",
                header.typ.as_deref().unwrap_or("none")
            )));
        }
        if !issuer.algorithms.contains(&header.alg) {
            return Err(AuthError::Invalid(format!("algorithm {:?} is not allowed for this issuer", header.alg)));
        }
        let kid = header.kid.as_deref().ok_or_else(|| AuthError::Invalid("the token names no key (kid)".into()))?;
        let (key, family) = self.key(&issuer, kid).await?;
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
        let audiences = self.audiences(&issuer.config, resource);
        let mut validation = Validation::new(header.alg);
        validation.set_audience(&audiences);
        validation.set_issuer(&[iss]);
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = decode::<Claims>(token, &key, &validation).map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidAudience => AuthError::Invalid(format!(
                "the token's audience {:?} is not this resource (expected {})",
                unverified.audiences(),
                audiences.join(" or ")
            )),
            _ => AuthError::Invalid(e.to_string()),
        })?;
        let mut claims = data.claims;
        limit_scopes(&mut claims, &issuer.config);
        Ok(Verified { claims, issuer: issuer.config.clone() })
    }
}

/// The token's scopes and those its roles grant (`role_scopes`), cut to
/// what `issuer` may grant: its `scopes` when listed, and never
/// `pilotage:admin` from an issuer tied to tenants.
fn limit_scopes(claims: &mut Claims, issuer: &IssuerConfig) {
    let mut held = claims.scopes();
    held.extend(issuer.role_granted(&claims.other));
    let kept: Vec<String> = held
        .into_iter()
        .filter(|scope| issuer.scopes.as_ref().is_none_or(|allowed| allowed.contains(scope)))
        .filter(|scope| issuer.is_operators() || scope != ADMIN_SCOPE)
        .collect();
    claims.scope = Some(kept.join(" "));
    claims.scp = None;
}

/// A shared verifier.
pub type SharedVerifier = Arc<JwtVerifier>;

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(scope: &str) -> Claims {
        Claims { scope: Some(scope.to_owned()), ..Claims::default() }
    }

    #[test]
    fn roles_grant_scopes_within_what_the_issuer_may_grant() {
        let mut tied = IssuerConfig::new("https://idp.test", "https://idp.test/jwks");
        tied.tenants = vec!["acme".into()];
        tied.roles_claim = Some("groups".into());
        tied.role_scopes.insert("ops".into(), vec!["pilotage:admin".into(), "pilotage:tenant-admin".into()]);
        tied.role_scopes.insert("readers".into(), vec!["pilotage:console".into()]);
        let with = |groups: serde_json::Value| {
            let mut claims = Claims { scope: Some("openid".into()), ..Claims::default() };
            claims.other.insert("groups".into(), groups);
            claims
        };
        let mut held = with(serde_json::json!(["ops", "unmapped"]));
        limit_scopes(&mut held, &tied);
        assert_eq!(held.scopes().into_iter().collect::<Vec<_>>(), ["openid", "pilotage:tenant-admin"]);
        let mut held = with(serde_json::json!("readers"));
        limit_scopes(&mut held, &tied);
        assert_eq!(held.scopes().into_iter().collect::<Vec<_>>(), ["openid", "pilotage:console"]);
        let mut held = with(serde_json::json!(7));
        limit_scopes(&mut held, &tied);
        assert_eq!(held.scopes().into_iter().collect::<Vec<_>>(), ["openid"]);
        // The operator's own issuer may map a group to pilotage:admin;
        // a listed `scopes` still cuts what roles grant.
        let mut operators = tied.clone();
        operators.tenants.clear();
        let mut held = with(serde_json::json!(["ops"]));
        limit_scopes(&mut held, &operators);
        assert!(held.scopes().contains(ADMIN_SCOPE));
        operators.scopes = Some(vec!["pilotage:tenant-admin".into()]);
        let mut held = with(serde_json::json!(["ops", "readers"]));
        limit_scopes(&mut held, &operators);
        assert_eq!(held.scopes().into_iter().collect::<Vec<_>>(), ["pilotage:tenant-admin"]);
        // Without a roles claim, nothing is read.
        operators.roles_claim = None;
        let mut held = with(serde_json::json!(["ops"]));
        limit_scopes(&mut held, &operators);
        assert!(held.scopes().is_empty());
    }

    #[test]
    fn an_issuer_tied_to_tenants_never_grants_admin_and_grants_only_what_it_may() {
        let mut tied = IssuerConfig::new("https://idp.acme.test/", "https://idp.acme.test/jwks");
        tied.tenants = vec!["acme".into()];
        let mut held = claims("pilotage:mcp pilotage:admin pilotage:tenant-admin");
        limit_scopes(&mut held, &tied);
        assert_eq!(held.scopes().into_iter().collect::<Vec<_>>(), ["pilotage:mcp", "pilotage:tenant-admin"]);

        let operators = IssuerConfig::new("https://login.operator.test", "https://login.operator.test/jwks");
        let mut held = claims("pilotage:mcp pilotage:admin");
        limit_scopes(&mut held, &operators);
        assert!(held.scopes().contains(ADMIN_SCOPE));

        let mut listed = operators.clone();
        listed.scopes = Some(vec!["pilotage:mcp".into()]);
        let mut held = claims("pilotage:mcp pilotage:admin");
        limit_scopes(&mut held, &listed);
        assert_eq!(held.scopes().into_iter().collect::<Vec<_>>(), ["pilotage:mcp"]);
    }

    #[test]
    fn scp_is_read_as_an_array_or_as_a_string() {
        let array: Claims = serde_json::from_value(serde_json::json!({"scp": ["a", "b"]})).unwrap();
        let text: Claims = serde_json::from_value(serde_json::json!({"scp": "a b"})).unwrap();
        assert_eq!(array.scopes(), text.scopes());
        assert_eq!(text.scopes().len(), 2);
        let neither: Result<Claims, _> = serde_json::from_value(serde_json::json!({"scp": 7}));
        assert!(neither.is_err());
    }
}
