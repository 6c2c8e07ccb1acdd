//! DPoP (RFC 9449): an access token bound to a key the client holds
//! (`cnf.jkt`, the key's RFC 7638 thumbprint) is accepted only with a
//! proof signed by that key for this very request, sent as
//! `Authorization: DPoP <token>` with a `DPoP: <proof>` header. Only from
//! an issuer marked `dpop`; a bound token from another issuer, or one sent
//! as a plain bearer token, is refused (a stolen token alone is useless).
//!
//! The proof (§4.3): a JWT of type `dpop+jwt`, an asymmetric algorithm, the
//! public key in its header (never a private one), signed by it; `htm` the
//! request's method, `htu` its URL without query or fragment, `iat` within
//! [`WINDOW_SECS`] of now, `jti` never seen before within the window (on
//! this replica), and `ath` the SHA-256 of the access token.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, ThumbprintHash};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::{AuthError, Claims};

/// How far a proof's `iat` may be from now, in seconds, either way.
pub const WINDOW_SECS: i64 = 60;

/// The most proof ids remembered at once; past it new proofs are refused
/// until old ones expire (fail closed: a flood cannot make a replay pass).
const MAX_REMEMBERED: usize = 100_000;

/// The algorithms a proof may use (`algs` in the challenge).
pub const ALGORITHMS: &str = "ES256 ES384 PS256 RS256 EdDSA";

/// What the request presented: the token's scheme, the proof, and the
/// request the proof must be for.
#[derive(Clone, Copy, Debug)]
pub struct Presented<'a> {
    /// The token came as `DPoP <token>` rather than `Bearer <token>`.
    pub dpop_scheme: bool,
    /// The `DPoP` header, when exactly one was sent.
    pub proof: Option<&'a str>,
    /// The request's method (`POST`).
    pub method: &'a str,
    /// The request's URL as the client addressed it: the public URL and
    /// the path, no query.
    pub url: &'a str,
}

#[derive(Deserialize)]
struct ProofClaims {
    htm: Option<String>,
    htu: Option<String>,
    iat: Option<i64>,
    jti: Option<String>,
    ath: Option<String>,
}

/// Proof ids seen within the window, with when they may be forgotten.
#[derive(Debug, Default)]
pub struct SeenProofs {
    seen: Mutex<HashMap<String, i64>>,
}

impl SeenProofs {
    /// Remembers `jti` until `until` (seconds); `false` when it was seen
    /// already, or when too many are remembered.
    fn first_use(&self, jti: &str, now: i64, until: i64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() >= MAX_REMEMBERED / 2 {
            seen.retain(|_, expires| *expires > now);
        }
        if seen.len() >= MAX_REMEMBERED || seen.get(jti).is_some_and(|expires| *expires > now) {
            return false;
        }
        seen.insert(jti.to_owned(), until);
        true
    }
}

/// The key thumbprint a token is bound to (`cnf.jkt`), if any.
pub fn bound_key(claims: &Claims) -> Option<&str> {
    claims.other.get("cnf")?.get("jkt")?.as_str()
}

/// Checks that `token`, whose claims are `claims` and whose issuer
/// `issues_dpop` or not, was presented as its binding requires.
///
/// # Errors
/// [`AuthError::DpopProof`] naming what is wrong with the proof;
/// [`AuthError::Invalid`] for a bound token its issuer is not trusted to
/// bind, or presented as a plain bearer token.
pub fn check(
    token: &str,
    claims: &Claims,
    issues_dpop: bool,
    presented: Presented<'_>,
    seen: &SeenProofs,
    now: i64,
) -> Result<(), AuthError> {
    let Some(jkt) = bound_key(claims) else {
        if presented.dpop_scheme {
            return Err(AuthError::DpopProof("the token is not bound to a key (no cnf.jkt): send it as Bearer".into()));
        }
        return Ok(());
    };
    if !issues_dpop {
        return Err(AuthError::Invalid(
            "the token is bound to a key (DPoP) but its issuer is not set to issue such tokens".into(),
        ));
    }
    if !presented.dpop_scheme {
        return Err(AuthError::DpopProof(
            "the token is bound to a key: send it as 'Authorization: DPoP' with a DPoP proof".into(),
        ));
    }
    let proof = presented.proof.ok_or_else(|| AuthError::DpopProof("exactly one DPoP header is required".into()))?;
    let invalid = |why: &str| AuthError::DpopProof(why.to_owned());
    let header = decode_header(proof).map_err(|e| AuthError::DpopProof(format!("the proof does not parse: {e}")))?;
    if !header.typ.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("dpop+jwt")) {
        return Err(invalid("the proof's typ must be dpop+jwt"));
    }
    if !matches!(
        header.alg,
        Algorithm::ES256 | Algorithm::ES384 | Algorithm::PS256 | Algorithm::RS256 | Algorithm::EdDSA
    ) {
        return Err(invalid("the proof's algorithm must be an asymmetric one"));
    }
    let jwk = header.jwk.as_ref().ok_or_else(|| invalid("the proof carries no jwk"))?;
    // A private key in the header would be a client's mistake that must not
    // be rewarded; a symmetric one proves nothing.
    if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_) | AlgorithmParameters::Other(_)) {
        return Err(invalid("the proof's jwk must be a public asymmetric key"));
    }
    let thumbprint =
        jwk.thumbprint(ThumbprintHash::SHA256).map_err(|_| invalid("the proof's jwk has no thumbprint"))?;
    if thumbprint != jkt {
        return Err(invalid("the proof is signed by another key than the one the token is bound to"));
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|_| invalid("the proof's jwk is not a usable key"))?;
    let mut validation = Validation::new(header.alg);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_aud = false;
    let claims = decode::<ProofClaims>(proof, &key, &validation)
        .map_err(|e| AuthError::DpopProof(format!("the proof's signature does not verify: {e}")))?
        .claims;
    if !claims.htm.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(presented.method)) {
        return Err(invalid("the proof's htm is not this request's method"));
    }
    if claims.htu.as_deref().map(without_query) != Some(without_query(presented.url)) {
        return Err(AuthError::DpopProof(format!("the proof's htu is not this request's URL ({})", presented.url)));
    }
    let iat = claims.iat.ok_or_else(|| invalid("the proof has no iat"))?;
    if (iat - now).abs() > WINDOW_SECS {
        return Err(invalid("the proof's iat is too far from now"));
    }
    let expected_ath = URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()));
    if claims.ath.as_deref() != Some(expected_ath.as_str()) {
        return Err(invalid("the proof's ath is not this token's hash"));
    }
    let jti = claims.jti.filter(|j| !j.is_empty() && j.len() <= 256).ok_or_else(|| invalid("the proof has no jti"))?;
    if !seen.first_use(&jti, now, now + 2 * WINDOW_SECS) {
        return Err(invalid("the proof was used already (its jti is known)"));
    }
    Ok(())
}

/// `url` without its query and fragment (RFC 9449 §4.3, step 9).
fn without_query(url: &str) -> &str {
    url.split(['?', '#']).next().unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_id_is_accepted_once_within_its_window_and_the_memory_is_bounded() {
        let seen = SeenProofs::default();
        assert!(seen.first_use("a", 1_000, 1_120));
        assert!(!seen.first_use("a", 1_001, 1_121));
        // Forgotten once expired.
        assert!(seen.first_use("a", 1_200, 1_320));
        assert_eq!(without_query("https://x.test/mcp?a=1#f"), "https://x.test/mcp");
    }
}
