//! Multi-tenancy through the real endpoint: bearer JWTs validated against
//! a real JWKS endpoint (RSA and EC keys generated here, rotated), every
//! bad token refused with 401 before anything runs, scoped catalogs and
//! `catalog_version`s, runs, idempotency keys and program references that
//! never leak between tenants or principals, and the admin API.

use std::sync::{Arc, RwLock};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use getrandom::SysRng;
use getrandom::rand_core::UnwrapErr;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use pilotage_client::{Connection, Reply};
use pilotage_server::auth::{AuthMode, IssuerConfig};
use pilotage_server::start::Server;
use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings};

const ISSUER: &str = "https://issuer.test";
pub(crate) const PUBLIC_URL: &str = "http://pilotage.test";
pub(crate) const ADMIN_TOKEN: &str = "operator-token-for-tests-0123456789";

/// A signing key and its public JWK.
pub(crate) struct Key {
    pub(crate) kid: String,
    algorithm: Algorithm,
    pub(crate) encoding: EncodingKey,
    pub(crate) jwk: Value,
    public_pem: String,
}

fn rsa_key(kid: &str) -> Key {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    use rsa::traits::PublicKeyParts;
    let private = rsa::PrivateKey::new(&mut UnwrapErr(SysRng), 2048).expect("an RSA key");
    let pem = private.to_pkcs8_pem(LineEnding::LF).unwrap();
    let public = private.to_public_key();
    Key {
        kid: kid.to_owned(),
        algorithm: Algorithm::RS256,
        encoding: EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
        jwk: json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                    "n": URL_SAFE_NO_PAD.encode(public.n_bytes()), "e": URL_SAFE_NO_PAD.encode(public.e_bytes())}),
        public_pem: public.to_public_key_pem(LineEnding::LF).unwrap(),
    }
}

pub(crate) fn ec_key(kid: &str) -> Key {
    use p256::pkcs8::{EncodePrivateKey, LineEnding};
    let signing = <p256::ecdsa::SigningKey as p256::elliptic_curve::Generate>::generate();
    let pem = signing.to_pkcs8_pem(LineEnding::LF).unwrap();
    let point = signing.verifying_key().to_sec1_point(false);
    Key {
        kid: kid.to_owned(),
        algorithm: Algorithm::ES256,
        encoding: EncodingKey::from_ec_pem(pem.as_bytes()).unwrap(),
        jwk: json!({"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                    "x": URL_SAFE_NO_PAD.encode(point.x().unwrap()), "y": URL_SAFE_NO_PAD.encode(point.y().unwrap())}),
        public_pem: String::new(),
    }
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// The audience a token holding `scope` is issued for: the admin API's
/// resource for an admin-side scope, the MCP resource otherwise.
pub(crate) fn audience_for(scope: &str) -> String {
    let admin_side = scope.split_whitespace().any(|s| pilotage_server::auth::ADMIN_SIDE_SCOPES.contains(&s));
    if admin_side { format!("{PUBLIC_URL}/admin/v1") } else { format!("{PUBLIC_URL}/mcp") }
}

pub(crate) fn claims(tenant: Value, subject: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": audience_for(scope), "sub": subject, "tenant": tenant, "scope": scope,
           "iat": now(), "nbf": now() - 5, "exp": now() + 600})
}

pub(crate) fn sign(key: &Key, claims: &Value) -> String {
    let mut header = Header::new(key.algorithm);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, claims, &key.encoding).unwrap()
}

/// A JWKS endpoint on loopback whose key set the test can replace.
pub(crate) struct Jwks {
    pub(crate) url: String,
    keys: Arc<RwLock<Vec<Value>>>,
}

pub(crate) async fn jwks(keys: Vec<Value>) -> Jwks {
    let keys = Arc::new(RwLock::new(keys));
    let shared = keys.clone();
    let router = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let keys = shared.clone();
            async move { axum::Json(json!({"keys": keys.read().unwrap().clone()})) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    Jwks { url, keys }
}

async fn jwt_server(jwks: &Jwks) -> Server {
    let mut settings = settings(Backend::Sqlite).await;
    settings.auth.mode = AuthMode::Jwt;
    settings.auth.issuers = vec![IssuerConfig::new(ISSUER, &jwks.url)];
    settings.public_url = Some(PUBLIC_URL.into());
    settings.allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "pilotage.test".into()];
    settings.admin_token = Some(ADMIN_TOKEN.into());
    server(settings).await
}

fn initialize() -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string()
}

async fn post_with(url: &str, token: Option<&str>) -> reqwest::Response {
    pilotage_client::install_crypto_provider();
    let mut request = reqwest::Client::new().post(url).header("content-type", "application/json").body(initialize());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_refused_with_401_and_good_ones_accepted() {
    let rsa = rsa_key("rsa-1");
    let ec = ec_key("ec-1");
    let jwks = jwks(vec![rsa.jwk.clone(), ec.jwk.clone()]).await;
    let server = jwt_server(&jwks).await;
    let url = server.mcp_url();
    let good = claims(json!("demo"), "alice", "pilotage:mcp");

    // No token: 401 pointing at the resource metadata.
    let response = post_with(&url, None).await;
    assert_eq!(response.status(), 401);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains("resource_metadata=\"http://pilotage.test/.well-known/oauth-protected-resource\""),
        "{challenge}"
    );

    let mut bad: Vec<(&str, String)> = Vec::new();
    let none_header = URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).to_string());
    bad.push(("alg none", format!("{none_header}.{}.", URL_SAFE_NO_PAD.encode(good.to_string()))));
    let mut confusion = Header::new(Algorithm::HS256);
    confusion.kid = Some("rsa-1".into());
    let hmac = EncodingKey::from_secret(rsa.public_pem.as_bytes()).unwrap();
    bad.push(("HS256 signed with the RSA public key", jsonwebtoken::encode(&confusion, &good, &hmac).unwrap()));
    let mut wrong_aud = good.clone();
    wrong_aud["aud"] = json!("http://elsewhere.test/mcp");
    bad.push(("wrong aud", sign(&rsa, &wrong_aud)));
    let mut wrong_iss = good.clone();
    wrong_iss["iss"] = json!("https://evil.test");
    bad.push(("wrong iss", sign(&rsa, &wrong_iss)));
    let mut expired = good.clone();
    expired["exp"] = json!(now() - 3600);
    bad.push(("expired", sign(&rsa, &expired)));
    let mut early = good.clone();
    early["nbf"] = json!(now() + 3600);
    bad.push(("not yet valid", sign(&rsa, &early)));
    let mut unknown_kid = Key { kid: "nobody".into(), ..rsa_key("nobody") };
    unknown_kid.jwk = Value::Null;
    bad.push(("unknown kid", sign(&unknown_kid, &good)));
    let (_, world) = server.demo_world.as_ref().unwrap();
    let run = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_workflow",
        "arguments": {"workflow": crate::endpoint::spec_program(), "input": {"userId": "42"}}}});
    for (what, token) in &bad {
        let response = post_with(&url, Some(token)).await;
        assert_eq!(response.status(), 401, "{what} was not refused with 401");
        assert!(response.headers().contains_key("www-authenticate"), "{what}: no challenge");
        let response = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .bearer_auth(token)
            .body(run.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{what}: a tool call got through");
    }
    assert!(world.calls().is_empty(), "a refused request executed something");

    // A good token naming no tenant: 403 saying so (another sign-in would
    // not help, so it is not a 401).
    let mut no_tenant = good.clone();
    no_tenant.as_object_mut().unwrap().remove("tenant");
    let response = post_with(&url, Some(&sign(&rsa, &no_tenant))).await;
    assert_eq!(response.status(), 403);
    let challenge = response.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.contains("error_description=\"the token names no tenant"), "{challenge}");

    // Missing scope: 403 naming the scope.
    let response = post_with(&url, Some(&sign(&rsa, &claims(json!("demo"), "alice", "openid")))).await;
    assert_eq!(response.status(), 403);
    assert!(response.headers()["www-authenticate"].to_str().unwrap().contains("scope=\"pilotage:mcp\""));

    // Good RSA and EC tokens work through the real client.
    for key in [&rsa, &ec] {
        let connection = Connection::http(&url, Some(&sign(key, &good))).await.expect("a valid token connects");
        assert!(connection.tools().await.unwrap().len() >= 6);
        connection.close().await;
    }

    // Rotation: a new key appears under a new kid and is picked up.
    let rotated = rsa_key("rsa-2");
    jwks.keys.write().unwrap().push(rotated.jwk.clone());
    tokio::time::sleep(pilotage_server::auth::jwt::REFRESH_INTERVAL + std::time::Duration::from_millis(200)).await;
    let connection = Connection::http(&url, Some(&sign(&rotated, &good))).await.expect("the rotated key is fetched");
    connection.close().await;

    // The resource metadata names the resource and the issuer.
    let metadata: Value = reqwest::get(format!("http://{}/.well-known/oauth-protected-resource", server.addr))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(metadata["resource"], "http://pilotage.test/mcp");
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
    server.stop().await;
}

/// An admin API call with the operator token.
pub(crate) async fn admin(server: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    pilotage_client::install_crypto_provider();
    let mut request = reqwest::Client::new()
        .request(method, format!("http://{}/admin/v1{path}", server.addr))
        .bearer_auth(ADMIN_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Uploads a Language component to `tenant` as the operator; asserts 201.
pub(crate) async fn upload_language(server: &Server, tenant: &str, component: &[u8]) {
    let response = reqwest::Client::new()
        .post(format!("http://{}/admin/v1/tenants/{tenant}/languages", server.addr))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(component.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

fn capability(id: &str, description: &str, binding: &str) -> Value {
    json!({"id": id, "kind": "capability", "name": id, "description": description,
           "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}}},
           "risk": "safe", "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
           "binding": {"url": binding}})
}

/// Two tenants, three principals: everything stays on its side.
pub(crate) struct World {
    pub(crate) server: Server,
    rsa: Key,
    _jwks: Jwks,
}

pub(crate) async fn two_tenants() -> World {
    let rsa = rsa_key("rsa-1");
    let jwks = jwks(vec![rsa.jwk.clone()]).await;
    let server = jwt_server(&jwks).await;
    let demo = format!("http://{}", server.demo_world.as_ref().unwrap().0);
    let workflow = pilotage_bundled::WORKFLOW.to_vec();
    for tenant in ["acme", "globex"] {
        let (status, _) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": tenant}))).await;
        assert_eq!(status, 201);
        upload_language(&server, tenant, &workflow).await;
    }
    let mut secret = capability("cap_secret", "acme finance only", &format!("{demo}/users/profile"));
    secret["visibility"] = json!(["finance"]);
    let (status, report) = admin(
        &server,
        reqwest::Method::POST,
        "/tenants/acme/catalog/apply",
        Some(json!({"entries": [
        capability("cap_shared", "acme's profile service", &format!("{demo}/users/profile")), secret]})),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["added"].as_array().unwrap().len(), 2);
    let (status, _) = admin(
        &server,
        reqwest::Method::POST,
        "/tenants/globex/catalog/apply",
        Some(json!({"entries": [
        capability("cap_shared", "globex's profile service", &format!("{demo}/users/profile")),
        capability("cap_other", "globex only", &format!("{demo}/users/profile"))]})),
    )
    .await;
    assert_eq!(status, 200);
    World { server, rsa, _jwks: jwks }
}

impl World {
    pub(crate) async fn as_(&self, tenant: &str, subject: &str, scope: &str) -> Connection {
        Connection::http(&self.server.mcp_url(), Some(&self.token(tenant, subject, scope))).await.unwrap()
    }

    /// A bearer token for `subject` of `tenant` holding `scope`.
    pub(crate) fn token(&self, tenant: &str, subject: &str, scope: &str) -> String {
        sign(&self.rsa, &claims(json!(tenant), subject, scope))
    }
}

pub(crate) fn result(reply: Reply) -> Value {
    match reply {
        Reply::Result(value) => value,
        Reply::RequestError(error) => serde_json::to_value(error).unwrap(),
    }
}

fn profile_program(capability: &str) -> Value {
    json!({"steps": [{"id": "p", "kind": "call", "capability": capability, "with": {"user_id": "42"}}], "output": "$.steps.p.output.name"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_and_scopes_never_leak() {
    let world = two_tenants().await;
    let a1 = world.as_("acme", "ann", "pilotage:mcp").await;
    let a2 = world.as_("acme", "bob", "pilotage:mcp finance").await;
    let g1 = world.as_("globex", "gil", "pilotage:mcp").await;
    async fn list(c: &Connection) -> Value {
        result(c.call("pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await.unwrap())
    }
    let ids = |v: &Value| {
        v["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let (l_a1, l_a2, l_g1) = (list(&a1).await, list(&a2).await, list(&g1).await);
    assert_eq!(ids(&l_a1), ["cap_shared"]);
    assert_eq!(ids(&l_a2), ["cap_secret", "cap_shared"]);
    assert_eq!(ids(&l_g1), ["cap_other", "cap_shared"]);
    assert_eq!(l_a1["items"][0]["description"], "acme's profile service", "same id, another tenant's entry");
    assert_ne!(l_a1["catalog_version"], l_a2["catalog_version"], "catalog_version is scope-dependent");

    // An invisible entry is the same as a missing one, byte for byte.
    let hidden = a1
        .call("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": "cap_secret"}))
        .await
        .unwrap();
    let missing = a1
        .call("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": "cap_nothing"}))
        .await
        .unwrap();
    assert_eq!(result(hidden), result(missing));

    // Hints name only visible entries.
    let for_a1 = result(a1.call("validate_workflow", json!({"workflow": profile_program("cap_secre")})).await.unwrap());
    assert!(!for_a1.to_string().contains("cap_secret"), "{for_a1}");
    let for_a2 = result(a2.call("validate_workflow", json!({"workflow": profile_program("cap_secre")})).await.unwrap());
    assert!(for_a2.to_string().contains("cap_secret"), "{for_a2}");
    // Execution-time authorization: a1 cannot run what only a2 sees.
    let refused = result(a1.call("run_workflow", json!({"workflow": profile_program("cap_secret")})).await.unwrap());
    assert_eq!(refused["outcome"]["status"], "validation_error");

    // Runs belong to their subject.
    let run = result(
        a2.call("run_workflow", json!({"workflow": profile_program("cap_shared"), "store": true})).await.unwrap(),
    );
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    let own = result(a2.call("trace_workflow", json!({"run_id": run["run_id"]})).await.unwrap());
    assert_eq!(own["run_id"], run["run_id"]);
    let unknown = result(a1.call("trace_workflow", json!({"run_id": "run_000000000000000000000000"})).await.unwrap());
    for stranger in [&a1, &g1] {
        let fetched = result(stranger.call("trace_workflow", json!({"run_id": run["run_id"]})).await.unwrap());
        assert_eq!(fetched, unknown, "another subject's run must look like no run at all");
    }

    // Idempotency keys are per tenant and subject.
    let first = result(
        a1.call("run_workflow", json!({"workflow": profile_program("cap_shared"), "idempotency_key": "same-key"}))
            .await
            .unwrap(),
    );
    let other = result(
        g1.call("run_workflow", json!({"workflow": profile_program("cap_other"), "idempotency_key": "same-key"}))
            .await
            .unwrap(),
    );
    assert_eq!(first["outcome"]["status"], "success");
    assert_eq!(other["outcome"]["status"], "success", "{other}");
    assert_ne!(first["run_id"], other["run_id"]);

    // A program reference of one tenant does not resolve in another.
    let promoted =
        result(a1.call("promote_workflow", json!({"workflow": profile_program("cap_shared")})).await.unwrap());
    let reference = promoted["program_ref"].clone();
    let elsewhere = result(g1.call("run_workflow", json!({"program_ref": reference})).await.unwrap());
    assert_eq!(elsewhere["error"]["kind"], "not_found");
    let at_home = result(a1.call("run_workflow", json!({"program_ref": reference, "input": {}})).await.unwrap());
    assert_eq!(at_home["outcome"]["status"], "success", "{at_home}");

    // catalog_version ignores other tenants and invisible changes.
    let before = list(&a1).await["catalog_version"].clone();
    let demo = format!("http://{}", world.server.demo_world.as_ref().unwrap().0);
    let mut changed = capability("cap_secret", "acme finance only, edited", &format!("{demo}/users/profile"));
    changed["visibility"] = json!(["finance"]);
    let (status, _) =
        admin(&world.server, reqwest::Method::PUT, "/tenants/acme/catalog/entries/cap_secret", Some(changed)).await;
    assert_eq!(status, 200);
    let (status, _) = admin(
        &world.server,
        reqwest::Method::PUT,
        "/tenants/globex/catalog/entries/cap_new",
        Some(capability("cap_new", "new", &format!("{demo}/users/profile"))),
    )
    .await;
    assert_eq!(status, 201);
    let after = list(&a1).await["catalog_version"].clone();
    assert_eq!(before, after, "an invisible or foreign change moved the token");
    for c in [a1, a2, g1] {
        c.close().await;
    }
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_cross_tenant_operations_never_leak() {
    let world = two_tenants().await;
    let principals =
        [("acme", "ann", "pilotage:mcp"), ("acme", "bob", "pilotage:mcp finance"), ("globex", "gil", "pilotage:mcp")];
    let mut connections = Vec::new();
    for (tenant, subject, scope) in principals {
        connections.push(world.as_(tenant, subject, scope).await);
    }
    // What each principal may ever see.
    let forbidden: [&[&str]; 3] =
        [&["cap_secret", "cap_other", "globex"], &["cap_other", "globex"], &["cap_secret", "acme"]];
    let mut runs: Vec<(usize, String)> = Vec::new();
    let mut seed: u64 = 0x5eed_1234_abcd_0001;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for _ in 0..60 {
        let who = next(3) as usize;
        let connection = &connections[who];
        let reply = match next(5) {
            0 => connection.call("pilotage_catalog", json!({"language": "workflow/v1", "verb": "list"})).await,
            1 => {
                let id = ["cap_secret", "cap_other", "cap_shared"][next(3) as usize];
                connection.call("pilotage_catalog", json!({"language": "workflow/v1", "verb": "get", "id": id})).await
            }
            2 => {
                // Near misses: a "did you mean" must never name what the caller cannot see.
                let near = ["cap_secre", "cap_othe", "cap_share"][next(3) as usize];
                connection.call("validate_workflow", json!({"workflow": profile_program(near)})).await
            }
            3 => {
                let reply = connection
                    .call("run_workflow", json!({"workflow": profile_program("cap_shared"), "store": true}))
                    .await;
                if let Ok(Reply::Result(value)) = &reply {
                    runs.push((who, value["run_id"].as_str().unwrap_or("").to_owned()));
                }
                reply
            }
            _ => match runs.get(next(runs.len().max(1) as u64) as usize) {
                Some((owner, run_id)) => {
                    let reply = connection.call("trace_workflow", json!({"run_id": run_id})).await;
                    let fetched = matches!(reply, Ok(Reply::Result(_)));
                    assert_eq!(fetched, *owner == who, "principal {who} fetching a run of principal {owner}");
                    reply
                }
                None => continue,
            },
        };
        let text = serde_json::to_string(&result(reply.unwrap())).unwrap();
        for word in forbidden[who] {
            assert!(!text.contains(word), "principal {who} saw '{word}': {text}");
        }
    }
    for c in connections {
        c.close().await;
    }
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_checks_uploads_and_keeps_secrets() {
    let world = two_tenants().await;
    let server = &world.server;
    let addr = server.addr;
    let upload = |bytes: Vec<u8>| async move {
        reqwest::Client::new()
            .post(format!("http://{addr}/admin/v1/tenants/acme/languages"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/wasm")
            .body(bytes)
            .send()
            .await
            .unwrap()
    };
    // A component that fails the lint is refused with the findings.
    let unfit = pilotage_test_support::UNFIT.to_vec();
    let response = upload(unfit).await;
    assert_eq!(response.status(), 422);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "lint_failed");
    assert!(body["error"]["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "closed-sets-guide"));
    let response = upload(b"not a component".to_vec()).await;
    assert_eq!(response.status(), 422);
    // The workflow Language is accepted (and the same bytes again too).
    assert_eq!(upload(pilotage_bundled::WORKFLOW.to_vec()).await.status(), 201);

    // Validation names the field; credentials are required.
    let (status, body) = admin(server, reqwest::Method::POST, "/tenants", Some(json!({"id": "Bad Id!"}))).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["field"], "id");
    let (status, body) =
        admin(server, reqwest::Method::POST, "/tenants", Some(json!({"id": "x", "colour": "red"}))).await;
    assert_eq!(status, 400, "{body}");
    let anonymous = reqwest::get(format!("http://{addr}/admin/v1/tenants")).await.unwrap();
    assert_eq!(anonymous.status(), 401);

    // A tenant admin sees only its tenant.
    let tenant_admin = sign(&world.rsa, &claims(json!("acme"), "carol", "pilotage:tenant-admin"));
    let response = reqwest::Client::new()
        .get(format!("http://{addr}/admin/v1/tenants/globex"))
        .bearer_auth(&tenant_admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    let response = reqwest::Client::new()
        .get(format!("http://{addr}/admin/v1/tenants/acme"))
        .bearer_auth(&tenant_admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // Issue 27 item 6: the tenant permission is decided from the path,
    // before a body is read. A 30 MiB upload declared to another tenant
    // (also spelt with a percent-encoded path) is refused 403 before a byte
    // of it is sent; to its own tenant, the server waits for the body.
    use crate::hardening_sessions::{head_only, read_response};
    for path in ["/admin/v1/tenants/globex/languages", "/admin/v1/tenants/%67lobex/languages"] {
        let mut stream = head_only(server, "POST", path, Some(&tenant_admin), 30 << 20).await;
        let (status, _, body) = tokio::time::timeout(std::time::Duration::from_secs(10), read_response(&mut stream))
            .await
            .expect("the server answered without the body");
        assert_eq!(status, 403, "{path}: {}", String::from_utf8_lossy(&body));
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["error"]["code"], "forbidden", "{body}");
    }
    let mut stream = head_only(server, "POST", "/admin/v1/tenants/acme/languages", Some(&tenant_admin), 1 << 20).await;
    let early = tokio::time::timeout(std::time::Duration::from_millis(500), read_response(&mut stream)).await;
    assert!(early.is_err(), "the server answered its own tenant's upload before the body arrived");
    drop(stream);

    // Secrets: stored, listed by name only, used by a binding, never returned.
    let (status, _) = admin(
        server,
        reqwest::Method::PUT,
        "/tenants/acme/secrets/profile_key",
        Some(json!({"value": "s3cr3t-value"})),
    )
    .await;
    assert_eq!(status, 200);
    let (_, names) = admin(server, reqwest::Method::GET, "/tenants/acme/secrets", None).await;
    assert_eq!(names["secrets"], json!(["profile_key"]));
    assert!(!names.to_string().contains("s3cr3t-value"));
    let seen = Arc::new(RwLock::new(Vec::<String>::new()));
    let recorder = seen.clone();
    let echo = axum::Router::new().route(
        "/profile",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let recorder = recorder.clone();
            async move {
                recorder
                    .write()
                    .unwrap()
                    .push(headers.get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned());
                axum::Json(json!({"name": "Echo"}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo_url = format!("http://{}/profile", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, echo).await });
    let mut entry = capability("cap_keyed", "needs a key", &echo_url);
    entry["binding"]["headers"] = json!({"x-api-key": "{secret:profile_key}"});
    let (status, stored) =
        admin(server, reqwest::Method::PUT, "/tenants/acme/catalog/entries/cap_keyed", Some(entry)).await;
    assert_eq!(status, 201);
    assert!(!stored.to_string().contains("s3cr3t-value"));
    let ann = world.as_("acme", "ann", "pilotage:mcp").await;
    let run = result(ann.call("run_workflow", json!({"workflow": profile_program("cap_keyed")})).await.unwrap());
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    assert_eq!(seen.read().unwrap().as_slice(), ["s3cr3t-value"]);
    assert!(!run.to_string().contains("s3cr3t-value"));

    // Quotas answer before anything runs, naming the limit.
    let (status, _) = admin(
        server,
        reqwest::Method::PATCH,
        "/tenants/acme",
        Some(
            json!({"quotas": {"max_concurrent_runs": 0, "requests_per_second": 100, "max_stored_run_bytes": 1000000}}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let refused = result(ann.call("run_workflow", json!({"workflow": profile_program("cap_keyed")})).await.unwrap());
    assert_eq!(refused["error"]["kind"], "bounds_exceeded");
    assert!(refused["error"]["message"].as_str().unwrap().contains("max_concurrent_runs"));
    assert_eq!(seen.read().unwrap().len(), 1, "a refused run reached the capability");

    // Disabling a tenant refuses its agents; the audit log recorded it all.
    let (status, _) = admin(server, reqwest::Method::PATCH, "/tenants/globex", Some(json!({"disabled": true}))).await;
    assert_eq!(status, 200);
    let token = sign(&world.rsa, &claims(json!("globex"), "gil", "pilotage:mcp"));
    assert_eq!(post_with(&server.mcp_url(), Some(&token)).await.status(), 403);
    let (_, audit) = admin(server, reqwest::Method::GET, "/audit", None).await;
    let actions: Vec<&str> = audit["audit"].as_array().unwrap().iter().map(|a| a["action"].as_str().unwrap()).collect();
    for action in
        ["tenant.create", "language.upload", "language.refuse", "catalog.apply", "secret.put", "tenant.update"]
    {
        assert!(actions.contains(&action), "{action} was not audited: {actions:?}");
    }
    let openapi: Value =
        reqwest::get(format!("http://{addr}/admin/v1/openapi.json")).await.unwrap().json().await.unwrap();
    assert_eq!(openapi["openapi"], "3.1.0");
    ann.close().await;
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_tokens_and_tenant_paths() {
    let server = server(settings(Backend::Sqlite).await).await;
    let dev = pilotage_server::auth::dev::DevTokens::load(
        &std::env::temp_dir().join(crate::endpoint::unique("other-secret")),
        format!("http://{}/mcp", server.addr),
    )
    .unwrap();
    // A token signed with another secret is refused even in dev mode.
    let foreign = dev.mint("demo", "mallory", &[], 60).unwrap();
    assert_eq!(post_with(&server.mcp_url(), Some(&foreign)).await.status(), 401);
    // No token in dev mode: the development principal, also under /t/demo/mcp.
    assert_eq!(post_with(&server.mcp_url(), None).await.status(), 200);
    assert_eq!(post_with(&format!("http://{}/t/demo/mcp", server.addr), None).await.status(), 200);
    assert_eq!(post_with(&format!("http://{}/t/nowhere/mcp", server.addr), None).await.status(), 403);
    server.stop().await;
    // Dev mode refuses to listen beyond loopback.
    let mut exposed = settings(Backend::Sqlite).await;
    exposed.listen = "0.0.0.0:0".parse().unwrap();
    assert!(exposed.check().is_err());
}
