//! A principal is its tenant, its issuer and its subject (OpenID Connect
//! Core §2: `sub` is unique only within its issuer). With two trusted
//! issuers, each minting an "alice" for one tenant, the two are different
//! principals everywhere something is kept per principal: MCP sessions,
//! tasks, idempotency keys, stored Runs, approvals and who may decide
//! them, budgets; and the audit log names the credential's kind and issuer,
//! so a token whose subject is "operator" is never read as the operator
//! token. Through the real endpoint, on SQLite and PostgreSQL, and across
//! two replicas sharing PostgreSQL for the sessions.

use pilotage_client::Connection;
use pilotage_server::auth::{AuthMode, IssuerConfig};
use pilotage_server::start::Server;
use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings};
use crate::hardening_sessions::{answer, opened, unknown_id};
use crate::tenancy::{ADMIN_TOKEN, Jwks, Key, PUBLIC_URL, admin, audience_for, ec_key, jwks, now, result, sign};

const FIRST: &str = "https://first-issuer.test";
const SECOND: &str = "https://second-issuer.test";
const MCP: &str = "pilotage:mcp";

/// A server trusting two issuers, each with its own key and JWKS, and the
/// demo tenant's catalog holding a write capability.
struct TwoIssuers {
    server: Server,
    first: Key,
    second: Key,
    _jwks: (Jwks, Jwks),
}

impl TwoIssuers {
    async fn start(backend: Backend) -> TwoIssuers {
        let (first, second) = (ec_key("first-1"), ec_key("second-1"));
        let jwks = (jwks(vec![first.jwk.clone()]).await, jwks(vec![second.jwk.clone()]).await);
        let mut settings = settings(backend).await;
        settings.auth.mode = AuthMode::Jwt;
        settings.auth.issuers = [(FIRST, &jwks.0), (SECOND, &jwks.1)]
            .into_iter()
            .map(|(issuer, jwks)| IssuerConfig {
                algorithms: vec!["ES256".into()],
                ..IssuerConfig::new(issuer, &jwks.url)
            })
            .collect();
        settings.public_url = Some(PUBLIC_URL.into());
        settings.allowed_hosts = vec!["127.0.0.1".into(), "localhost".into(), "pilotage.test".into()];
        settings.admin_token = Some(ADMIN_TOKEN.into());
        let server = server(settings).await;
        let profile = format!("http://{}/users/profile", server.demo_world.as_ref().unwrap().0);
        let entry = json!({"id": "cap_write", "kind": "capability", "name": "cap_write", "description": "a write",
            "input_schema": {"type": "object", "properties": {"user_id": {"type": "string"}}},
            "risk": "write", "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
            "binding": {"url": profile}});
        let (status, body) =
            admin(&server, reqwest::Method::PUT, "/tenants/demo/catalog/entries/cap_write", Some(entry)).await;
        assert!(status < 300, "{status} {body}");
        TwoIssuers { server, first, second, _jwks: jwks }
    }

    /// A token of `issuer` (signed with its key) for `subject` of the demo
    /// tenant holding `scope`.
    fn token(&self, issuer: &str, subject: &str, scope: &str) -> String {
        let key = if issuer == FIRST { &self.first } else { &self.second };
        let claims = json!({"iss": issuer, "aud": audience_for(scope), "sub": subject, "tenant": "demo",
                            "scope": scope, "iat": now(), "nbf": now() - 5, "exp": now() + 600});
        sign(key, &claims)
    }

    async fn connect(&self, issuer: &str, subject: &str) -> Connection {
        Connection::http(&self.server.mcp_url(), Some(&self.token(issuer, subject, MCP))).await.unwrap()
    }

    /// An admin API call with a bearer token of `issuer`'s `subject`
    /// holding `pilotage:admin`.
    async fn admin_as(&self, issuer: &str, subject: &str, path: &str, body: Value) -> (u16, Value) {
        let response = reqwest::Client::new()
            .post(format!("http://{}/admin/v1{path}", self.server.addr))
            .bearer_auth(self.token(issuer, subject, "pilotage:admin"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, serde_json::from_str(&response.text().await.unwrap()).unwrap_or(Value::Null))
    }
}

/// A workflow of one write; `tag` tells requests apart (its output).
fn write(tag: &str) -> Value {
    json!({"steps": [{"id": "w", "kind": "call", "capability": "cap_write", "with": {"user_id": "42"}}],
           "output": {"tag": tag}})
}

async fn run(connection: &Connection, args: Value) -> Value {
    result(connection.call("run_workflow", args).await.unwrap())
}

async fn set_policy(server: &Server, policy: Value) {
    let (status, body) = admin(server, reqwest::Method::PUT, "/tenants/demo/policy", Some(policy)).await;
    assert_eq!(status, 200, "{body}");
}

async fn one_subject_of_two_issuers_is_two_principals(backend: Backend) {
    let world = TwoIssuers::start(backend).await;
    let server = &world.server;
    let first_alice = world.connect(FIRST, "alice").await;
    let second_alice = world.connect(SECOND, "alice").await;

    // MCP sessions: the first alice's session is unknown to the second,
    // byte for byte as an unknown id, and served to its owner.
    let mcp = server.mcp_url();
    let first_token = world.token(FIRST, "alice", MCP);
    let second_token = world.token(SECOND, "alice", MCP);
    let session = opened(&mcp, Some(&first_token)).await;
    let foreign = answer(reqwest::Method::POST, &mcp, &second_token, &session, &[]).await;
    let unknown = answer(reqwest::Method::POST, &mcp, &second_token, &unknown_id(), &[]).await;
    assert_eq!(foreign, unknown, "{}", String::from_utf8_lossy(&foreign.1));
    assert_eq!(foreign.0, 404);
    assert_eq!(answer(reqwest::Method::POST, &mcp, &first_token, &session, &[]).await.0, 200);

    // Idempotency keys: one key, two principals, two Runs; the same
    // principal reusing its key for another request is refused.
    let keyed = |tag: &str| json!({"workflow": write(tag), "idempotency_key": "shared-key", "store": true});
    let first_run = run(&first_alice, keyed("1")).await;
    assert_eq!(first_run["outcome"]["status"], "success", "{first_run}");
    let second_run = run(&second_alice, keyed("2")).await;
    assert_eq!(second_run["outcome"]["status"], "success", "the other issuer's alice has her own keys: {second_run}");
    assert_ne!(first_run["run_id"], second_run["run_id"]);
    let replay = run(&first_alice, keyed("1")).await;
    assert_eq!(replay["run_id"], first_run["run_id"], "{replay}");
    let reused = run(&first_alice, keyed("3")).await;
    assert!(reused["error"]["message"].as_str().is_some_and(|m| m.contains("shared-key")), "{reused}");

    // Stored Runs: a trace is fetched by the principal that ran it only.
    let fetch = json!({"run_id": first_run["run_id"]});
    let own = result(first_alice.call("trace_workflow", fetch.clone()).await.unwrap());
    assert_eq!(own["run_id"], first_run["run_id"], "{own}");
    let stranger = result(second_alice.call("trace_workflow", fetch).await.unwrap());
    assert_eq!(stranger["error"]["kind"], "not_found", "{stranger}");

    // Tasks: the first alice's task is unknown to the second.
    let tasks_first = crate::tasks::connect(&mcp, Some(&first_token), true, false).await;
    let tasks_second = crate::tasks::connect(&mcp, Some(&second_token), true, false).await;
    let task_id = crate::tasks::start_task(&tasks_first, "run_workflow", json!({"workflow": write("4")})).await;
    let (done, _) = crate::tasks::until_terminal(&tasks_first, &task_id, std::time::Duration::from_secs(20)).await;
    assert_eq!(crate::tasks::completed_result(&done)["outcome"]["status"], "success");
    let missing = crate::tasks::rpc_message(
        crate::tasks::get(&tasks_second, "task_00000000000000000000000000000000").await.unwrap_err(),
    );
    let foreign = crate::tasks::rpc_message(crate::tasks::get(&tasks_second, &task_id).await.unwrap_err());
    assert_eq!(foreign, missing, "the other issuer's alice reads the task as unknown");
    for client in [tasks_first, tasks_second] {
        let _ = client.cancel().await;
    }

    // Budgets: one write Run per principal; the second alice has her own.
    set_policy(server, json!({"budgets": [{"risk": "write", "runs": 1, "window_s": 3600}]})).await;
    assert_eq!(run(&first_alice, json!({"workflow": write("5")})).await["outcome"]["status"], "success");
    let spent = run(&first_alice, json!({"workflow": write("6")})).await;
    assert_eq!(spent["outcome"]["status"], "budget_exceeded", "{spent}");
    let own_budget = run(&second_alice, json!({"workflow": write("7")})).await;
    assert_eq!(own_budget["outcome"]["status"], "success", "{own_budget}");

    // Approvals: the asker's own admin token cannot decide; the other
    // issuer's alice is someone else and can, and is recorded with her
    // issuer.
    set_policy(server, json!({"rules": [{"risk": "write", "decision": "approve"}]})).await;
    let held = run(&first_alice, json!({"workflow": write("8")})).await;
    assert_eq!(held["outcome"]["status"], "approval_required", "{held}");
    let id = held["approval"]["id"].as_str().unwrap().to_owned();
    let approve = format!("/tenants/demo/approvals/{id}/approve");
    let (status, own) = world.admin_as(FIRST, "alice", &approve, json!({})).await;
    assert_eq!(status, 403, "the asker decided its own request: {own}");
    let (status, decided) = world.admin_as(SECOND, "alice", &approve, json!({})).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["issuer"], FIRST, "{decided}");
    assert_eq!(decided["decided_by"], format!("alice ({SECOND})"), "{decided}");
    let approved = run(&first_alice, json!({"workflow": write("8")})).await;
    assert_eq!(approved["outcome"]["status"], "success", "{approved}");

    // The audit log names each credential's kind and issuer: a token
    // whose subject is "operator" is a JWT of its issuer, never the
    // operator token.
    let (status, body) = world.admin_as(FIRST, "operator", "/tenants", json!({"id": "by-a-subject"})).await;
    assert_eq!(status, 201, "{body}");
    let (_, audit) = admin(server, reqwest::Method::GET, "/audit?limit=200", None).await;
    let records = audit["audit"].as_array().unwrap();
    let find = |action: &str| records.iter().find(|r| r["action"] == action).cloned().unwrap_or(Value::Null);
    let approval = find("approval.approve");
    assert_eq!(
        (approval["credential"].as_str(), approval["issuer"].as_str()),
        (Some("jwt"), Some(SECOND)),
        "{approval}"
    );
    let asked = find("approval.request");
    assert_eq!((asked["credential"].as_str(), asked["issuer"].as_str()), (Some("jwt"), Some(FIRST)), "{asked}");
    let policy = find("tenant.policy");
    assert_eq!((policy["credential"].as_str(), policy["issuer"].as_str()), (Some("operator-token"), Some("")));
    let created = find("tenant.create");
    assert_eq!(created["actor"], "operator", "{created}");
    assert_eq!((created["credential"].as_str(), created["issuer"].as_str()), (Some("jwt"), Some(FIRST)), "{created}");
    world.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_subject_of_two_issuers_is_two_principals_on_sqlite() {
    one_subject_of_two_issuers_is_two_principals(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_subject_of_two_issuers_is_two_principals_on_postgres() {
    one_subject_of_two_issuers_is_two_principals(Backend::Postgres).await;
}

/// Across replicas: a session opened on one replica by the first issuer's
/// "alice" is, on another replica sharing the store, unknown to the second
/// issuer's "alice" (the same answer as an unknown id, byte for byte) and
/// served to its owner. The stored session names its issuer (migration 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_belongs_to_its_issuers_subject_on_every_replica() {
    let (first, second) = (ec_key("first-1"), ec_key("second-1"));
    let (first_jwks, second_jwks) = (jwks(vec![first.jwk.clone()]).await, jwks(vec![second.jwk.clone()]).await);
    let database = crate::endpoint::postgres_schema().await;
    let args = [
        "--auth",
        "jwt",
        "--jwt-issuer",
        FIRST,
        "--jwt-jwks-url",
        &first_jwks.url,
        "--jwt-issuer",
        SECOND,
        "--jwt-jwks-url",
        &second_jwks.url,
        "--public-url",
        PUBLIC_URL,
    ];
    let dir = std::env::temp_dir().join(crate::endpoint::unique("issuer-replicas"));
    let a = crate::fleet::replica_process(&dir, &database, &args).await;
    let b = crate::fleet::replica_process(&dir, &database, &args).await;
    let token = |key: &Key, issuer: &str| {
        sign(
            key,
            &json!({"iss": issuer, "aud": format!("{PUBLIC_URL}/mcp"), "sub": "alice", "tenant": "demo",
                          "scope": MCP, "iat": now(), "nbf": now() - 5, "exp": now() + 600}),
        )
    };
    let (first_alice, second_alice) = (token(&first, FIRST), token(&second, SECOND));
    let (on_a, on_b) = (format!("http://{}/mcp", a.addr), format!("http://{}/mcp", b.addr));
    let session = opened(&on_a, Some(&first_alice)).await;
    let foreign = answer(reqwest::Method::POST, &on_b, &second_alice, &session, &[]).await;
    let unknown = answer(reqwest::Method::POST, &on_b, &second_alice, &unknown_id(), &[]).await;
    assert_eq!(foreign, unknown, "{}", String::from_utf8_lossy(&foreign.1));
    assert_eq!(foreign.0, 404);
    let own = answer(reqwest::Method::POST, &on_b, &first_alice, &session, &[]).await;
    assert_eq!(own.0, 200, "the owner is served on the other replica: {}", String::from_utf8_lossy(&own.1));
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}
