//! Agents over OAuth with the identity providers customers already have
//! (MCP authorization; RFC 9728 protected-resource metadata, RFC 8707
//! resource indicators, RFC 6750 refusals, RFC 9068 access tokens).
//! Through the real endpoint, with four issuers shaped like the common
//! providers, each with its own key and JWKS:
//!
//! - the operator's own issuer (any tenant, `pilotage:admin` allowed);
//! - a customer's provider tied to `acme`, whose identifier ends in `/`
//!   as Auth0's does, naming no tenant in its tokens;
//! - an Entra-shaped one tied to `globex`: `scp` as a space-separated
//!   string, the API's client id as audience;
//! - a Keycloak-shaped one naming the tenant by the resource its tokens
//!   were issued for (`/t/{tenant}/mcp`), with `typ` `at+jwt` required.
//!
//! Both polarities each time: the MCP resource and the admin API are two
//! audiences (an agent's token never reaches the admin API, nor an admin
//! token the MCP resource); metadata advertises only what an agent needs;
//! an issuer acts only for its tenants and never grants `pilotage:admin`;
//! each refusal says in its challenge what is wrong.

use jsonwebtoken::{Algorithm, Header};
use pilotage_client::Connection;
use pilotage_server::auth::{AuthMode, IssuerConfig, TenantFrom};
use pilotage_server::start::Server;
use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings};
use crate::fleet::ADMIN_TOKEN as FLEET_TOKEN;
use crate::tenancy::{ADMIN_TOKEN, Jwks, Key, PUBLIC_URL, admin, ec_key, jwks, now, sign, upload_language};

const OPERATOR: &str = "https://login.operator.test";
const ACME_IDP: &str = "https://acme.idp.test/";
const ENTRA: &str = "https://login.entra.test/0f1e2d3c/v2.0";
const ENTRA_AUDIENCE: &str = "api://5c1d9a7e-pilotage";
const KEYCLOAK: &str = "https://kc.test/realms/customers";

struct Providers {
    server: Server,
    keys: Vec<(&'static str, Key)>,
    _jwks: Vec<Jwks>,
}

impl Providers {
    async fn start() -> Providers {
        let mut keys = Vec::new();
        let mut served = Vec::new();
        let mut issuers = Vec::new();
        for (n, issuer) in [OPERATOR, ACME_IDP, ENTRA, KEYCLOAK].into_iter().enumerate() {
            let key = ec_key(&format!("key-{n}"));
            let set = jwks(vec![key.jwk.clone()]).await;
            let mut config = IssuerConfig::new(issuer, &set.url);
            match issuer {
                ACME_IDP => config.tenants = vec!["acme".into()],
                ENTRA => {
                    config.tenants = vec!["globex".into()];
                    config.audience = Some(ENTRA_AUDIENCE.into());
                }
                KEYCLOAK => {
                    config.tenants = vec!["acme".into(), "globex".into()];
                    config.tenant_from = TenantFrom::Resource;
                    config.access_token_type = true;
                }
                _ => {}
            }
            issuers.push(config);
            keys.push((issuer, key));
            served.push(set);
        }
        let mut settings = settings(Backend::Sqlite).await;
        settings.auth.mode = AuthMode::Jwt;
        settings.auth.issuers = issuers;
        settings.public_url = Some(PUBLIC_URL.into());
        settings.allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "pilotage.test".into()];
        settings.admin_token = Some(ADMIN_TOKEN.into());
        let server = server(settings).await;
        for tenant in ["acme", "globex"] {
            let (status, body) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": tenant}))).await;
            assert_eq!(status, 201, "{body}");
            upload_language(&server, tenant, pilotage_bundled::WORKFLOW).await;
        }
        Providers { server, keys, _jwks: served }
    }

    /// A token of `issuer` carrying `claims` over its defaults (`iss`,
    /// `sub`, times), with the header type `typ`.
    fn token(&self, issuer: &str, claims: Value, typ: &str) -> String {
        let key = &self.keys.iter().find(|(name, _)| *name == issuer).unwrap().1;
        let mut full = json!({"iss": issuer, "sub": "someone", "iat": now(), "nbf": now() - 5, "exp": now() + 600});
        for (name, value) in claims.as_object().unwrap() {
            full[name] = value.clone();
        }
        if typ == "JWT" {
            return sign(key, &full);
        }
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(key.kid.clone());
        header.typ = Some(typ.to_owned());
        jsonwebtoken::encode(&header, &full, &key.encoding).unwrap()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }

    /// An MCP `initialize` posted to `path` with `token`: the status and
    /// the challenge.
    async fn initialize(&self, path: &str, token: Option<&str>) -> (u16, String) {
        initialize_at(&self.url(path), token).await
    }

    /// `GET /admin/v1{path}` with `token`: the status and the body.
    async fn admin_get(&self, path: &str, token: &str) -> (u16, Value) {
        let response =
            reqwest::Client::new().get(self.url(&format!("/admin/v1{path}"))).bearer_auth(token).send().await;
        let response = response.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn metadata(&self, path: &str) -> (u16, Value) {
        let response = reqwest::get(self.url(path)).await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

fn mcp() -> String {
    format!("{PUBLIC_URL}/mcp")
}

fn admin_aud() -> String {
    format!("{PUBLIC_URL}/admin/v1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_and_operators_hold_different_audiences_and_metadata_asks_only_what_an_agent_needs() {
    let world = Providers::start().await;

    // The MCP resource's metadata: every issuer, and only the agent's scope.
    let (status, metadata) = world.metadata("/.well-known/oauth-protected-resource").await;
    assert_eq!(status, 200);
    assert_eq!(metadata["resource"], mcp());
    assert_eq!(metadata["scopes_supported"], json!(["pilotage:mcp"]));
    assert_eq!(metadata["authorization_servers"], json!([OPERATOR, ACME_IDP, ENTRA, KEYCLOAK]));
    assert_eq!(world.metadata("/.well-known/oauth-protected-resource/mcp").await.1, metadata);
    // One tenant's resource (RFC 9728 §3.3: the resource an SDK asked
    // about is the one named) and the issuers that may serve it.
    let (status, acme) = world.metadata("/.well-known/oauth-protected-resource/t/acme/mcp").await;
    assert_eq!(status, 200);
    assert_eq!(acme["resource"], format!("{PUBLIC_URL}/t/acme/mcp"));
    assert_eq!(acme["authorization_servers"], json!([OPERATOR, ACME_IDP, KEYCLOAK]));
    let (_, globex) = world.metadata("/.well-known/oauth-protected-resource/t/globex/mcp").await;
    assert_eq!(globex["authorization_servers"], json!([OPERATOR, ENTRA, KEYCLOAK]));
    // The admin API is a resource of its own, with the admin-side scopes.
    let (status, admin_side) = world.metadata("/.well-known/oauth-protected-resource/admin/v1").await;
    assert_eq!(status, 200);
    assert_eq!(admin_side["resource"], admin_aud());
    assert!(admin_side["scopes_supported"].as_array().unwrap().contains(&json!("pilotage:admin")));
    let anonymous = reqwest::get(world.url("/admin/v1/tenants")).await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"].to_str().unwrap(),
        format!("Bearer resource_metadata=\"{PUBLIC_URL}/.well-known/oauth-protected-resource/admin/v1\"")
    );
    // Other well-known paths are not here: 404, not the MCP routes' 401.
    for path in ["/.well-known/openid-configuration", "/.well-known/oauth-authorization-server", "/.well-known/x"] {
        assert_eq!(world.metadata(path).await.0, 404, "{path}");
    }

    // No token: 401 naming the scope to ask for and the metadata of the
    // resource the request was for.
    let (status, challenge) = world.initialize("/mcp", None).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("scope=\"pilotage:mcp\""), "{challenge}");
    assert!(challenge.contains("/.well-known/oauth-protected-resource\""), "{challenge}");
    let (status, challenge) = world.initialize("/t/acme/mcp", None).await;
    assert_eq!(status, 401);
    assert!(
        challenge
            .contains(&format!("resource_metadata=\"{PUBLIC_URL}/.well-known/oauth-protected-resource/t/acme/mcp\"")),
        "{challenge}"
    );

    // An agent's token (the MCP audience) whose issuer granted every scope
    // asked for: it works on /mcp and is refused by the admin API.
    let greedy = world.token(
        OPERATOR,
        json!({"aud": mcp(), "tenant": "acme", "scope": "pilotage:mcp pilotage:admin pilotage:tenant-admin"}),
        "JWT",
    );
    let agent = Connection::http(&world.url("/mcp"), Some(&greedy)).await.expect("the agent connects");
    agent.close().await;
    let (status, body) = world.admin_get("/tenants", &greedy).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("an agent's token"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains(&admin_aud()), "{body}");
    // The same grant for the admin API's audience administers; presented
    // to the MCP resource it is refused, the challenge saying why.
    let operator =
        world.token(OPERATOR, json!({"aud": admin_aud(), "tenant": "acme", "scope": "pilotage:admin"}), "JWT");
    let (status, body) = world.admin_get("/tenants", &operator).await;
    assert_eq!(status, 200, "{body}");
    let (status, challenge) = world.initialize("/mcp", Some(&operator)).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(challenge.contains("error_description=\"invalid token: the token's audience"), "{challenge}");
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customers_issuer_acts_only_for_its_tenants_and_common_provider_shapes_are_read() {
    let world = Providers::start().await;

    // The acme provider (issuer with a trailing `/`, no tenant claim): its
    // tokens act in acme, on /mcp and on /t/acme/mcp.
    let acme_agent = world.token(ACME_IDP, json!({"aud": mcp(), "scope": "pilotage:mcp"}), "JWT");
    for path in ["/mcp", "/t/acme/mcp"] {
        let connection = Connection::http(&world.url(path), Some(&acme_agent)).await.expect("acme's agent connects");
        connection.close().await;
    }
    // ...never in globex, by path or by claim, and the refusal says so
    // without sending the SDK into a step-up (no insufficient_scope).
    let (status, challenge) = world.initialize("/t/globex/mcp", Some(&acme_agent)).await;
    assert_eq!(status, 403);
    assert!(!challenge.contains("insufficient_scope"), "{challenge}");
    assert!(challenge.contains("not for tenant 'globex'"), "{challenge}");
    let claims_globex =
        world.token(ACME_IDP, json!({"aud": mcp(), "scope": "pilotage:mcp", "tenant": "globex"}), "JWT");
    let (status, challenge) = world.initialize("/mcp", Some(&claims_globex)).await;
    assert_eq!(status, 403);
    assert!(challenge.contains(&format!("the issuer {ACME_IDP} may not act for tenant 'globex'")), "{challenge}");
    // Its pilotage:admin is ignored: it may administer acme as a tenant
    // admin, not the platform.
    let self_made_operator = world.token(ACME_IDP, json!({"aud": admin_aud(), "scope": "pilotage:admin"}), "JWT");
    let (status, body) = world.admin_get("/tenants", &self_made_operator).await;
    assert_eq!(status, 403, "{body}");
    let tenant_admin = world.token(ACME_IDP, json!({"aud": admin_aud(), "scope": "pilotage:tenant-admin"}), "JWT");
    let (status, body) = world.admin_get("/tenants/acme", &tenant_admin).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = world.admin_get("/tenants/globex", &tenant_admin).await;
    assert_eq!(status, 403, "{body}");

    // Entra-shaped: `scp` a string, the API's client id as audience.
    let entra = world.token(ENTRA, json!({"aud": ENTRA_AUDIENCE, "scp": "pilotage:mcp User.Read"}), "JWT");
    let connection = Connection::http(&world.url("/mcp"), Some(&entra)).await.expect("an Entra-shaped token connects");
    connection.close().await;
    // The configured audience replaces the default one for that issuer.
    let entra_default_aud = world.token(ENTRA, json!({"aud": mcp(), "scp": "pilotage:mcp"}), "JWT");
    assert_eq!(world.initialize("/mcp", Some(&entra_default_aud)).await.0, 401);
    // A string `scp` without the agent's scope steps up, naming it.
    let entra_reader = world.token(ENTRA, json!({"aud": ENTRA_AUDIENCE, "scp": "User.Read"}), "JWT");
    let (status, challenge) = world.initialize("/mcp", Some(&entra_reader)).await;
    assert_eq!(status, 403);
    assert!(challenge.contains("error=\"insufficient_scope\", scope=\"pilotage:mcp\""), "{challenge}");

    // Keycloak-shaped: the tenant is the resource the token was issued
    // for, and only RFC 9068 access tokens are taken.
    let for_acme = json!({"aud": format!("{PUBLIC_URL}/t/acme/mcp"), "scope": "openid pilotage:mcp"});
    let keycloak = world.token(KEYCLOAK, for_acme.clone(), "at+jwt");
    let connection =
        Connection::http(&world.url("/t/acme/mcp"), Some(&keycloak)).await.expect("a resource-bound token connects");
    connection.close().await;
    let (status, challenge) = world.initialize("/t/globex/mcp", Some(&keycloak)).await;
    assert_eq!(status, 401, "{challenge}");
    // On /mcp it is a token for another resource, and the challenge says
    // which one it was issued for.
    let (status, challenge) = world.initialize("/mcp", Some(&keycloak)).await;
    assert_eq!(status, 401);
    assert!(challenge.contains(&format!("audience ['{PUBLIC_URL}/t/acme/mcp'] is not this resource")), "{challenge}");
    let id_token_shaped = world.token(KEYCLOAK, for_acme, "JWT");
    let (status, challenge) = world.initialize("/t/acme/mcp", Some(&id_token_shaped)).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("at+jwt"), "{challenge}");

    // An unknown and a disabled tenant: 403 saying which.
    let nosuch = world.token(OPERATOR, json!({"aud": mcp(), "tenant": "nosuch", "scope": "pilotage:mcp"}), "JWT");
    let (status, challenge) = world.initialize("/mcp", Some(&nosuch)).await;
    assert_eq!(status, 403);
    assert!(challenge.contains("there is no tenant 'nosuch' here"), "{challenge}");
    let (status, _) =
        admin(&world.server, reqwest::Method::PATCH, "/tenants/globex", Some(json!({"disabled": true}))).await;
    assert_eq!(status, 200);
    let (status, challenge) = world.initialize("/mcp", Some(&entra)).await;
    assert_eq!(status, 403);
    assert!(challenge.contains("the tenant 'globex' is disabled"), "{challenge}");
    world.server.stop().await;
}

/// An MCP `initialize` posted to `url` with `token`: the status and the
/// challenge.
async fn initialize_at(url: &str, token: Option<&str>) -> (u16, String) {
    pilotage_client::install_crypto_provider();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let challenge =
        response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    (response.status().as_u16(), challenge)
}

/// Polls `url` with `token` until it answers `status` (a replica applies
/// another's change when it hears of it), at most 15 s.
async fn until_status(url: &str, token: &str, status: u16) -> (u16, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let answer = initialize_at(url, Some(token)).await;
        if answer.0 == status || std::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// An admin API call on `addr` with the operator token.
async fn admin_at(
    addr: std::net::SocketAddr,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request =
        reqwest::Client::new().request(method, format!("http://{addr}/admin/v1{path}")).bearer_auth(FLEET_TOKEN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_issuer_is_stored_audited_and_trusted_on_every_replica() {
    const CUSTOMER: &str = "https://idp.demo-customer.test/";
    // This test's own HTTP clients may be the process's first.
    pilotage_client::install_crypto_provider();
    let (operator_key, customer_key) = (ec_key("operator-1"), ec_key("customer-1"));
    let (operator_jwks, customer_jwks) =
        (jwks(vec![operator_key.jwk.clone()]).await, jwks(vec![customer_key.jwk.clone()]).await);
    let database = crate::endpoint::postgres_schema().await;
    let args =
        ["--auth", "jwt", "--jwt-issuer", OPERATOR, "--jwt-jwks-url", &operator_jwks.url, "--public-url", PUBLIC_URL];
    let dir = std::env::temp_dir().join(crate::endpoint::unique("tenant-issuers"));
    let a = crate::fleet::replica_process(&dir, &database, &args).await;
    let b = crate::fleet::replica_process(&dir, &database, &args).await;
    let (mcp_a, mcp_b) = (format!("http://{}/mcp", a.addr), format!("http://{}/mcp", b.addr));
    let claims = |extra: Value| {
        let mut claims = json!({"iss": CUSTOMER, "aud": mcp(), "sub": "dana", "scope": "pilotage:mcp",
                                "iat": now(), "nbf": now() - 5, "exp": now() + 600});
        for (name, value) in extra.as_object().unwrap() {
            claims[name] = value.clone();
        }
        sign(&customer_key, &claims)
    };
    let customers = claims(json!({}));

    // Not trusted yet: refused on both replicas, and no tenant's metadata
    // names it.
    for url in [&mcp_a, &mcp_b] {
        let (status, challenge) = initialize_at(url, Some(&customers)).await;
        assert_eq!(status, 401);
        assert!(challenge.contains("untrusted issuer"), "{challenge}");
    }
    let metadata = |addr: std::net::SocketAddr| async move {
        let url = format!("http://{addr}/.well-known/oauth-protected-resource/t/demo/mcp");
        reqwest::get(url).await.unwrap().json::<Value>().await.unwrap()
    };
    assert_eq!(metadata(b.addr).await["authorization_servers"], json!([OPERATOR]));

    // What an operator may not store: the server's own issuer, a symmetric
    // algorithm, another tenant in `tenants`, a key URL that is not one.
    let entry = json!({"issuer": CUSTOMER, "jwks_url": customer_jwks.url, "algorithms": ["ES256"]});
    for (bad, field) in [
        (json!({"issuer": OPERATOR, "jwks_url": customer_jwks.url}), "issuers[0].issuer"),
        (json!({"issuer": CUSTOMER, "jwks_url": customer_jwks.url, "algorithms": ["HS256"]}), "issuers[0].algorithms"),
        (json!({"issuer": CUSTOMER, "jwks_url": customer_jwks.url, "tenants": ["globex"]}), "issuers[0].tenants"),
        (json!({"issuer": CUSTOMER, "jwks_url": "not a url"}), "issuers[0].jwks_url"),
    ] {
        let (status, body) =
            admin_at(a.addr, reqwest::Method::PATCH, "/tenants/demo", Some(json!({"issuers": [bad]}))).await;
        assert_eq!((status, body["error"]["field"].as_str()), (400, Some(field)), "{body}");
    }
    let (status, body) =
        admin_at(a.addr, reqwest::Method::PATCH, "/tenants/demo", Some(json!({"issuers": [entry, entry]}))).await;
    assert_eq!(status, 400, "listed twice: {body}");

    // The operator trusts it for the demo tenant through the CLI, on
    // replica A: stored, audited, and in force on replica B too.
    // Its `groups` claim maps onto the platform's scopes; a malformed
    // mapping is refused by the CLI before anything is sent.
    let trust = |roles: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
            .args(["tenant", "trust", "demo", "--issuer", CUSTOMER, "--jwks-url", &customer_jwks.url])
            .args(["--roles-claim", "groups"])
            .args(roles.iter().flat_map(|role| ["--role", role]))
            .args(["--algorithm", "ES256", "--server", &format!("http://{}", a.addr), "--admin-token", FLEET_TOKEN])
            .output()
            .unwrap()
    };
    let malformed = trust(&["agents"]);
    assert_eq!(malformed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&malformed.stderr).contains("is not ROLE=SCOPE"), "{malformed:?}");
    let trusted = trust(&["agents=pilotage:mcp", "ops=pilotage:admin,pilotage:tenant-admin"]);
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
    let (status, shown) = admin_at(a.addr, reqwest::Method::GET, "/tenants/demo", None).await;
    assert_eq!(status, 200);
    assert_eq!(shown["issuers"][0]["issuer"], CUSTOMER, "{shown}");
    assert_eq!(
        shown["issuers"][0]["role_scopes"],
        json!({"agents": ["pilotage:mcp"], "ops": ["pilotage:admin", "pilotage:tenant-admin"]}),
        "{shown}"
    );
    let (status, challenge) = until_status(&mcp_b, &customers, 200).await;
    assert_eq!(status, 200, "the other replica trusts the stored issuer: {challenge}");
    assert_eq!(initialize_at(&mcp_a, Some(&customers)).await.0, 200);
    assert_eq!(metadata(b.addr).await["authorization_servers"], json!([OPERATOR, CUSTOMER]));
    // Its tokens act in the demo tenant only, and never as an operator.
    let (status, challenge) = initialize_at(&mcp_b, Some(&claims(json!({"tenant": "globex"})))).await;
    assert_eq!(status, 403);
    assert!(challenge.contains("may not act for tenant 'globex'"), "{challenge}");
    let self_made_operator = claims(json!({"aud": format!("{PUBLIC_URL}/admin/v1"), "scope": "pilotage:admin"}));
    let listed = reqwest::Client::new()
        .get(format!("http://{}/admin/v1/tenants", b.addr))
        .bearer_auth(&self_made_operator)
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 403);
    // A person's groups grant scopes: an agent in `agents` with no scope of
    // its own connects; one in no mapped group steps up; `ops` makes a
    // tenant admin of the demo tenant, never an operator.
    let in_group = |groups: Value, aud: String| claims(json!({"scope": "openid", "groups": groups, "aud": aud}));
    assert_eq!(initialize_at(&mcp_b, Some(&in_group(json!(["agents"]), mcp()))).await.0, 200);
    let (status, challenge) = initialize_at(&mcp_b, Some(&in_group(json!("visitors"), mcp()))).await;
    assert_eq!(status, 403);
    assert!(challenge.contains("insufficient_scope"), "{challenge}");
    let ops = in_group(json!(["ops"]), format!("{PUBLIC_URL}/admin/v1"));
    for (method, path, expected) in
        [(reqwest::Method::GET, "/tenants/demo", 200), (reqwest::Method::POST, "/tenants", 403)]
    {
        let answer = reqwest::Client::new()
            .request(method, format!("http://{}/admin/v1{path}", b.addr))
            .bearer_auth(&ops)
            .json(&json!({"id": "made-by-a-group"}))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), expected, "{path}");
    }
    let (_, audit) = admin_at(a.addr, reqwest::Method::GET, "/audit", None).await;
    let recorded =
        audit["audit"].as_array().unwrap().iter().any(|row| {
            row["action"] == "tenant.update" && row["detail"].to_string().contains("idp.demo-customer.test")
        });
    assert!(recorded, "the trust was not audited: {audit}");

    // Distrusted on replica B: refused on A once it hears of it.
    let distrusted = std::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["tenant", "distrust", "demo", "--issuer", CUSTOMER])
        .args(["--server", &format!("http://{}", b.addr), "--admin-token", FLEET_TOKEN])
        .output()
        .unwrap();
    assert!(distrusted.status.success(), "{}", String::from_utf8_lossy(&distrusted.stderr));
    let (status, challenge) = until_status(&mcp_a, &customers, 401).await;
    assert_eq!(status, 401, "{challenge}");
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["tenant", "distrust", "demo", "--issuer", CUSTOMER])
        .args(["--server", &format!("http://{}", b.addr), "--admin-token", FLEET_TOKEN])
        .output()
        .unwrap();
    assert!(!again.status.success(), "distrusting an issuer not trusted says so");
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}

/// A real OpenID provider (`tests/interop/oauth/provider.mjs`, npm
/// `oidc-provider`) on a free loopback port, killed when dropped.
struct OpenIdProvider {
    issuer: String,
    _process: tokio::process::Child,
}

impl OpenIdProvider {
    async fn start() -> OpenIdProvider {
        use tokio::io::AsyncBufReadExt as _;
        crate::interop::npm_installed(
            "tests/interop/oauth",
            "@modelcontextprotocol/client",
            "oidc-provider and the TypeScript SDK clients",
        );
        let mut process = tokio::process::Command::new("node")
            .arg("tests/interop/oauth/provider.mjs")
            .current_dir(crate::support::repository())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            // Its start-up warnings (a development adapter and sign-in
            // forms) are expected; the flow scripts report what matters.
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs the provider");
        let mut lines = tokio::io::BufReader::new(process.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("the provider starts within 30 s")
            .unwrap()
            .unwrap_or_default();
        let issuer =
            first.strip_prefix("ISSUER ").unwrap_or_else(|| panic!("the provider printed {first:?}")).to_owned();
        // Its later lines are not read; keep the pipe drained.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        OpenIdProvider { issuer, _process: process }
    }

    /// A server's settings trusting this provider as the demo tenant's
    /// (its tokens name no tenant), requiring `typ` at+jwt when
    /// `access_token_type`.
    /// The console's (and the approval page's) sign-in through it, as
    /// its client `pilotage-console`.
    fn console_sign_in(&self) -> pilotage_server::auth::ConsoleSignIn {
        pilotage_server::auth::ConsoleSignIn {
            issuer: self.issuer.clone(),
            client_id: "pilotage-console".into(),
            client_secret: None,
            scopes: vec!["openid".into(), "pilotage:console".into()],
            label: Some("Sign in with the demo company's account".into()),
        }
    }

    async fn trusted_for_demo(&self, access_token_type: bool) -> pilotage_server::settings::Settings {
        let mut settings = settings(Backend::Sqlite).await;
        settings.auth.mode = AuthMode::Jwt;
        settings.auth.issuers = vec![IssuerConfig {
            algorithms: vec!["ES256".into()],
            tenants: vec!["demo".into()],
            access_token_type,
            ..IssuerConfig::new(&self.issuer, format!("{}/jwks", self.issuer))
        }];
        settings
    }
}

/// An official SDK's OAuth flow (`script` run by `program`:
/// `tests/interop/oauth/flow.mjs` with node, `flow.py` with the Python
/// SDK's interpreter) against `mcp_url`: its report.
async fn sdk_flow(program: String, script: &str, variant: &str, mcp_url: String, base: String) -> Value {
    let args = vec![mcp_url, base, crate::endpoint::spec_program().to_string(), variant.to_owned()];
    let script = crate::support::repository().join(script);
    let report = tokio::task::spawn_blocking(move || crate::interop::run_script(&program, &script, &args))
        .await
        .expect("the flow runs");
    let line = report.stdout.lines().rev().find(|line| line.starts_with('{')).unwrap_or_default();
    assert!(
        report.status.success(),
        "the SDK's OAuth flow failed:\nstdout: {}\nstderr: {}",
        report.stdout,
        report.stderr
    );
    serde_json::from_str(line).unwrap_or_else(|e| panic!("no report ({e}): {}", report.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_sign_in_through_a_real_openid_provider_on_both_resource_paths() {
    let provider = OpenIdProvider::start().await;
    // Its tokens are RFC 9068 access tokens.
    let settings = provider.trusted_for_demo(true).await;
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);

    // TypeScript 1.x, the TypeScript v2 client, Python.
    let sdks = [
        ("node".to_owned(), "tests/interop/oauth/flow.mjs", "v1"),
        ("node".to_owned(), "tests/interop/oauth/flow.mjs", "v2"),
        (crate::interop::python_sdk(), "tests/interop/oauth/flow.py", ""),
    ];
    for ((program, script, variant), path) in
        sdks.iter().flat_map(|sdk| ["/mcp", "/t/demo/mcp"].map(|path| (sdk, path)))
    {
        let resource = format!("{base}{path}");
        let report = sdk_flow(program.clone(), script, variant, resource.clone(), base.clone()).await;
        let path = format!("{script} {variant} {path}");
        if script.ends_with(".mjs") && path.ends_with(" /mcp") {
            // A refusal's words reach the SDK's error. (A token issued for
            // /t/demo/mcp is another resource's at /t/nosuch/mcp: the SDK
            // starts a new sign-in there instead.)
            let refusal = report["refusal"].as_str().unwrap_or_default();
            assert!(refusal.contains("not for tenant 'nosuch'"), "{path}: {report}");
        }
        // It asked for the agent's scope only, for the resource it
        // connected to, and registered itself.
        // (The Python SDK adds offline_access for a refresh token.)
        let asked: Vec<&str> = report["asked_scope"].as_str().unwrap_or_default().split(' ').collect();
        assert!(asked.contains(&"pilotage:mcp"), "{path}: {report}");
        assert!(!asked.iter().any(|s| pilotage_server::auth::ADMIN_SIDE_SCOPES.contains(s)), "{path}: {report}");
        assert_eq!(report["asked_resource"], resource, "{path}: {report}");
        assert_eq!(report["registered"], true, "{report}");
        assert_eq!(
            (report["token_type"].as_str(), report["token_audience"].as_str()),
            (Some("at+jwt"), Some(resource.as_str()))
        );
        // The tools answered through the token.
        assert!(report["languages"].as_array().unwrap().iter().any(|l| l == "workflow/v1"), "{report}");
        assert_eq!(report["validated"], true, "{report}");
        assert_eq!(report["validate_result"]["valid"], true, "{report}");
        // The admin API refused the agent's token, saying why.
        assert_eq!(report["admin_status"], 403, "{report}");
        assert!(report["admin_message"].as_str().unwrap().contains("an agent's token"), "{report}");
        assert_eq!(report["refresh_token"], true, "{report}");
    }
    server.stop().await;
}

/// A DPoP proof (RFC 9449 §4.2) by `key` for `method` `url` and `token`.
fn dpop_proof(key: &Key, method: &str, url: &str, token: &str, jti: &str, iat: u64) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some("dpop+jwt".into());
    header.jwk = Some(serde_json::from_value(key.jwk.clone()).unwrap());
    let ath = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(token.as_bytes()));
    let claims = json!({"htm": method, "htu": url, "iat": iat, "jti": jti, "ath": ath});
    jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_bound_token_is_accepted_only_with_a_fresh_proof_of_its_key() {
    const DPOP_IDP: &str = "https://dpop.idp.test";
    let (operator_key, idp_key) = (ec_key("operator-1"), ec_key("idp-1"));
    let (operator_jwks, idp_jwks) = (jwks(vec![operator_key.jwk.clone()]).await, jwks(vec![idp_key.jwk.clone()]).await);
    let mut settings = settings(Backend::Sqlite).await;
    settings.auth.mode = AuthMode::Jwt;
    settings.auth.issuers = vec![
        IssuerConfig::new(OPERATOR, &operator_jwks.url),
        IssuerConfig { tenants: vec!["demo".into()], dpop: true, ..IssuerConfig::new(DPOP_IDP, &idp_jwks.url) },
    ];
    settings.public_url = Some(PUBLIC_URL.into());
    settings.allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "pilotage.test".into()];
    let server = server(settings).await;
    let (client_key, thief_key) = (ec_key("client-1"), ec_key("thief-1"));
    let thumbprint = serde_json::from_value::<jsonwebtoken::jwk::Jwk>(client_key.jwk.clone())
        .unwrap()
        .thumbprint(jsonwebtoken::jwk::ThumbprintHash::SHA256)
        .unwrap();
    let bound = |issuer: &str, key: &Key| {
        sign(
            key,
            &json!({"iss": issuer, "aud": mcp(), "sub": "erin", "tenant": "demo", "scope": "pilotage:mcp",
                    "cnf": {"jkt": thumbprint}, "iat": now(), "nbf": now() - 5, "exp": now() + 600}),
        )
    };
    let token = bound(DPOP_IDP, &idp_key);
    let url = format!("http://{}/mcp", server.addr);
    let htu = mcp();
    let post = |authorization: String, proof: Option<String>| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let mut request = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", authorization)
            .json(&body);
        if let Some(proof) = proof {
            request = request.header("dpop", proof);
        }
        async move {
            let response = request.send().await.unwrap();
            let challenge =
                response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
            (response.status().as_u16(), challenge)
        }
    };

    // With a fresh proof of the bound key, for this request: accepted.
    let proof = dpop_proof(&client_key, "POST", &htu, &token, "jti-1", now());
    let (status, challenge) = post(format!("DPoP {token}"), Some(proof.clone())).await;
    assert_eq!(status, 200, "{challenge}");
    // Every other presentation is refused, the challenge saying why.
    let refused = [
        ("as a bearer token", format!("Bearer {token}"), None, "send it as 'Authorization: DPoP'"),
        ("without a proof", format!("DPoP {token}"), None, "exactly one DPoP header"),
        ("the same proof again", format!("DPoP {token}"), Some(proof), "used already"),
        (
            "a proof by another key",
            format!("DPoP {token}"),
            Some(dpop_proof(&thief_key, "POST", &htu, &token, "jti-2", now())),
            "another key",
        ),
        (
            "a proof for another method",
            format!("DPoP {token}"),
            Some(dpop_proof(&client_key, "GET", &htu, &token, "jti-3", now())),
            "htm",
        ),
        (
            "a proof for another URL",
            format!("DPoP {token}"),
            Some(dpop_proof(&client_key, "POST", &format!("{PUBLIC_URL}/t/demo/mcp"), &token, "jti-4", now())),
            "htu",
        ),
        (
            "a proof for another token",
            format!("DPoP {token}"),
            Some(dpop_proof(&client_key, "POST", &htu, "another-token", "jti-5", now())),
            "ath",
        ),
        (
            "an old proof",
            format!("DPoP {token}"),
            Some(dpop_proof(&client_key, "POST", &htu, &token, "jti-6", now() - 600)),
            "iat",
        ),
    ];
    for (what, authorization, proof, why) in refused {
        let (status, challenge) = post(authorization, proof).await;
        assert_eq!(status, 401, "{what}: {challenge}");
        assert!(challenge.starts_with("DPoP error=\"invalid_dpop_proof\""), "{what}: {challenge}");
        assert!(challenge.contains(why), "{what}: {challenge}");
    }
    // A bound token from an issuer not set to issue them is refused too.
    let operators = bound(OPERATOR, &operator_key);
    let proof = dpop_proof(&client_key, "POST", &htu, &operators, "jti-7", now());
    let (status, challenge) = post(format!("DPoP {operators}"), Some(proof)).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("its issuer is not set to issue such tokens"), "{challenge}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_signs_in_to_the_console_through_the_openid_provider_in_a_browser() {
    use pilotage_test_support::browser::Browser;
    let provider = OpenIdProvider::start().await;
    // The people it signs in read the demo tenant's pages.
    let mut settings = provider.trusted_for_demo(false).await;
    settings.console = true;
    settings.console_sign_in = Some(provider.console_sign_in());
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");

    // From a tenant page, signed out: the sign-in page offers the provider.
    browser.goto(&format!("{base}/console/t/demo/catalog")).await.unwrap();
    let offered = browser.text("#sign-in-provider").await.unwrap();
    assert_eq!(offered, "Sign in with the demo company's account");
    assert!(browser.exists("#token").await.unwrap(), "the pasted credential stays beside it");
    browser.click("#sign-in-provider").await.unwrap();
    // The provider's own pages: a sign-in, then a consent.
    wait_for(&browser, "input[name=login]").await;
    browser.fill("input[name=login]", "olive").await.unwrap();
    browser.fill("input[name=password]", "any").await.unwrap();
    browser.submit("input[name=login]").await.unwrap();
    wait_for(&browser, "input[name=prompt][value=consent]").await;
    browser.submit("input[name=prompt][value=consent]").await.unwrap();
    // Back where it was going, signed in as the provider's person.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !browser.current_url().await.unwrap().starts_with(&format!("{base}/console/t/demo/catalog")) {
        assert!(std::time::Instant::now() < deadline, "not back: {}", browser.current_url().await.unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let cookies = browser.cookies().await.unwrap();
    assert!(cookies.iter().any(|c| c.name == "pilotage_console"), "no session cookie");
    assert!(!cookies.iter().any(|c| c.name == "pilotage_console_oidc"), "the pending sign-in was not cleared");
    let page = browser.text("body").await.unwrap();
    assert!(page.contains("olive"), "the page does not name who signed in: {page}");
    // A reader of demo: the operator's home is not theirs.
    browser.goto(&format!("{base}/console/t/other/catalog")).await.unwrap();
    assert!(!browser.text("body").await.unwrap().contains("Catalog of other"));

    // A callback that no sign-in here started opens nothing.
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let forged = http.get(format!("{base}/console/oidc/callback?code=stolen&state=guessed")).send().await.unwrap();
    assert_eq!(forged.status(), 401);
    assert!(forged.headers().get("set-cookie").is_none());
    assert!(forged.text().await.unwrap().contains("was not started here"));
    browser.close().await.unwrap();
    server.stop().await;
}

/// A person signs in on the approval page itself through the same
/// provider: the provider's group `demo-approvers` is mapped onto
/// `pilotage:approve` (`role_scopes`), so one in it comes back to the page
/// able to decide, and one outside it is told why not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_signs_in_on_the_approval_page_through_the_openid_provider() {
    use pilotage_test_support::browser::Browser;
    const AGENTS: &str = "https://agents.operator.test";
    let provider = OpenIdProvider::start().await;
    let mut settings = provider.trusted_for_demo(false).await;
    settings.auth.issuers[0].roles_claim = Some("groups".into());
    settings.auth.issuers[0].role_scopes.insert("demo-approvers".into(), vec!["pilotage:approve".into()]);
    // The agent that asks: a token of the operator's own issuer.
    let agent_key = ec_key("agent-1");
    let agent_jwks = jwks(vec![agent_key.jwk.clone()]).await;
    settings
        .auth
        .issuers
        .push(IssuerConfig { algorithms: vec!["ES256".into()], ..IssuerConfig::new(AGENTS, &agent_jwks.url) });
    settings.console = true;
    settings.console_sign_in = Some(provider.console_sign_in());
    settings.admin_token = Some(ADMIN_TOKEN.into());
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    let policy = json!({"rules": [{"risk": "destructive", "decision": "approve"}]});
    let (status, body) = admin(&server, reqwest::Method::PUT, "/tenants/demo/policy", Some(policy)).await;
    assert_eq!(status, 200, "{body}");
    let agent = sign(
        &agent_key,
        &json!({"iss": AGENTS, "aud": format!("{base}/mcp"), "sub": "agent-7", "tenant": "demo",
                "scope": "pilotage:mcp", "iat": now(), "nbf": now() - 5, "exp": now() + 600}),
    );
    let connection = Connection::http(&server.mcp_url(), Some(&agent)).await.expect("the agent connects");
    // A destructive plan: the demo tenant's policy holds it for a person.
    let program = json!({"steps": [{"id": "cancel", "kind": "call", "capability": "cap_cancel_order",
                                     "with": {"order_id": "A-1001"}}]});
    let held = match connection.call("run_workflow", json!({"workflow": program, "store": false})).await.unwrap() {
        pilotage_client::Reply::Result(held) => held,
        other => panic!("{other:?}"),
    };
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    let id = held["approval"]["id"].as_str().unwrap().to_owned();
    let page = format!("{base}/approvals/{id}");

    // Each person in a browser of their own (the provider keeps its own
    // session per browser).
    let sign_in_as = |login: &'static str| {
        let page = page.clone();
        async move {
            let browser = Browser::start().await.expect("headless Chromium (Debian's chromium and chromium-driver)");
            browser.goto(&page).await.unwrap();
            assert_eq!(browser.text("#sign-in-provider").await.unwrap(), "Sign in with the demo company's account");
            assert!(browser.exists("#token").await.unwrap(), "the pasted credential stays beside it");
            browser.click("#sign-in-provider").await.unwrap();
            wait_for(&browser, "input[name=login]").await;
            browser.fill("input[name=login]", login).await.unwrap();
            browser.fill("input[name=password]", "any").await.unwrap();
            browser.submit("input[name=login]").await.unwrap();
            wait_for(&browser, "input[name=prompt][value=consent]").await;
            browser.submit("input[name=prompt][value=consent]").await.unwrap();
            browser
        }
    };
    // Outside the group: the approval page's sign-in again, saying why,
    // no decision offered.
    let browser = sign_in_as("olive").await;
    wait_for(&browser, "[role=alert]").await;
    assert!(browser.exists("#sign-in-provider").await.unwrap());
    assert!(browser.text("[role=alert]").await.unwrap().contains("may not decide approvals"));
    assert!(!browser.exists("#reject").await.unwrap());
    browser.close().await.unwrap();
    // In it: the page itself, signed in, with the decision; the pending
    // sign-in's cookie is gone.
    let browser = sign_in_as("approver-ann").await;
    wait_for(&browser, "#reject").await;
    assert_eq!(browser.current_url().await.unwrap(), page, "back on the approval's own page");
    assert_eq!(browser.text("#state").await.unwrap(), "pending");
    let cookies = browser.cookies().await.unwrap();
    assert!(cookies.iter().any(|c| c.name == "pilotage_approver"), "no approval session");
    assert!(!cookies.iter().any(|c| c.name == "pilotage_console_oidc"), "the pending sign-in was not cleared");
    browser.click("#reject").await.unwrap();
    wait_for(&browser, "#decided").await;
    assert!(browser.text("#decided").await.unwrap().contains("approver-ann"), "decided by the provider's person");
    browser.close().await.unwrap();
    connection.close().await;
    server.stop().await;
}

/// Waits until `selector` exists on the browser's page, at most 15 s.
async fn wait_for(browser: &pilotage_test_support::browser::Browser, selector: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !browser.exists(selector).await.unwrap_or(false) {
        assert!(std::time::Instant::now() < deadline, "{selector} never appeared at {:?}", browser.current_url().await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
