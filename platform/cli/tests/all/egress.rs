//! Tenant-supplied destinations confined (issue 27 item 5): with
//! `egress.allow_private` off, a tenant cannot register an MQTT broker, a
//! data source or an HTTP binding at a loopback, private or link-local
//! address (nor at a name that resolves to one); an operator's CIDR lets it;
//! narrowing the rules afterwards stops the next connection, not only the
//! next registration; MQTT filters stay below the tenant's topic prefix and
//! `$`-topics are refused. Every refusal is read from the API's answer: no
//! test here sends a packet to an address outside the loopback range (the
//! public and private literals are only registered, never connected to).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pilotage_client::{Connection, PilotageClient};
use pilotage_server::start::Server;
use serde_json::{Value, json};

use crate::deployments::{Broker, await_firings, await_subscriptions, deployer_settings, publish};
use crate::endpoint::{Backend, postgres_url, unique};
use crate::sql_endpoint::postgres;
use crate::tenancy::{admin, result, upload_language as upload};

const PUT: reqwest::Method = reqwest::Method::PUT;
const PATCH: reqwest::Method = reqwest::Method::PATCH;

/// A loopback HTTP service answering `{"pong": true}` and counting calls.
async fn pong() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let app = axum::Router::new().route(
        "/ping",
        axum::routing::post(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({"pong": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/ping", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, calls)
}

fn entry(id: &str, url: &str) -> Value {
    json!({"id": id, "kind": "capability", "name": id, "description": "a loopback service",
           "input_schema": {"type": "object"}, "risk": "safe",
           "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false},
           "binding": {"url": url, "timeout_ms": 5000}})
}

/// Asserts a 403 `destination_refused` at `field` and returns its message.
fn refused(answer: &(u16, Value), field: &str) -> String {
    let (status, body) = answer;
    assert_eq!(*status, 403, "{body}");
    assert_eq!(body["error"]["code"], "destination_refused", "{body}");
    assert_eq!(body["error"]["field"], field, "{body}");
    body["error"]["message"].as_str().unwrap().to_owned()
}

async fn acme(server: &Server, data_dir: &std::path::Path) -> Connection {
    let audience = format!("http://{}/mcp", server.addr);
    let dev = pilotage_server::auth::dev::DevTokens::load(data_dir, audience).unwrap();
    let token = dev.mint("acme", "ann", &["pilotage:mcp".to_owned()], 600).unwrap();
    Connection::http(&server.mcp_url(), Some(&token)).await.expect("acme connects")
}

async fn confined(backend: Backend) {
    let broker = Broker::start();
    let (pong_url, pong_calls) = pong().await;
    let mut settings = deployer_settings(backend).await;
    // The demo is on (the deployer Language is served to its tenant), so
    // private addresses are refused by saying so.
    settings.egress.allow_private = Some(false);
    let server = crate::endpoint::server(settings.clone()).await;
    let schema = unique("pilotage_egress");
    postgres(&format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.items (id integer PRIMARY KEY)")).await;
    let (status, created) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": "acme"}))).await;
    assert_eq!((status, &created["egress"]), (201, &json!({})), "{created}");
    upload(&server, "acme", pilotage_bundled::WORKFLOW).await;
    upload(&server, "acme", pilotage_bundled::SQL).await;

    // No rules: only public addresses. Loopback, link-local, private, an
    // IPv4-mapped loopback, a name that resolves to loopback and a Unix
    // socket are refused where they are registered.
    let ledger = "/tenants/acme/data-sources/ledger";
    let pg = postgres_url();
    let by_name = pg.replacen("127.0.0.1", "localhost", 1);
    assert_ne!(pg, by_name, "the test database is addressed as 127.0.0.1");
    for url in [pg.clone(), by_name, "postgres://postgres@%2Fvar%2Frun%2Fpostgresql/test".to_owned()] {
        let answer = admin(&server, PUT, ledger, Some(json!({"url": url, "schemas": [schema]}))).await;
        refused(&answer, "url");
    }
    let entries = "/tenants/acme/catalog/entries";
    for url in [
        pong_url.clone(),
        "http://[::1]:9/x".to_owned(),
        "http://169.254.169.254/latest/meta-data".to_owned(),
        "http://10.20.30.40/x".to_owned(),
        "http://[::ffff:127.0.0.1]:9/x".to_owned(),
        "http://localhost:9/x".to_owned(),
    ] {
        let answer = admin(&server, PUT, &format!("{entries}/cap_ping"), Some(entry("cap_ping", &url))).await;
        refused(&answer, "entry.binding.url");
    }
    let answer = admin(
        &server,
        reqwest::Method::POST,
        "/tenants/acme/catalog/apply",
        Some(json!({"entries": [
            entry("cap_public", "http://93.184.215.14/x"), entry("cap_ping", &pong_url)]})),
    )
    .await;
    refused(&answer, "entries[1].binding.url");
    let loopback_broker = json!({"url": format!("mqtt://127.0.0.1:{}", broker.port)}).to_string();
    let answer = admin(&server, PUT, "/tenants/acme/secrets/mqtt:house", Some(json!({"value": loopback_broker}))).await;
    refused(&answer, "value.url");
    // A public literal is registered (and never connected to here).
    let (status, body) =
        admin(&server, PUT, &format!("{entries}/cap_public"), Some(entry("cap_public", "http://93.184.215.14/x")))
            .await;
    assert_eq!(status, 201, "{body}");

    // Only an operator sets the rules, and a bad rule is refused whole.
    let (status, body) =
        admin(&server, PATCH, "/tenants/acme", Some(json!({"egress": {"allow": ["10.0.0.0/33"]}}))).await;
    assert_eq!((status, body["error"]["field"].as_str()), (400, Some("egress")), "{body}");
    let (status, body) =
        admin(&server, PATCH, "/tenants/acme", Some(json!({"egress": {"mqtt_topic_prefix": "$SYS"}}))).await;
    assert_eq!(status, 400, "{body}");
    let loopback = json!({"allow": ["127.0.0.0/8"]});
    let (status, body) = admin(&server, PATCH, "/tenants/acme", Some(json!({"egress": loopback}))).await;
    assert_eq!((status, &body["egress"]), (200, &loopback), "{body}");
    let (_, shown) = admin(&server, reqwest::Method::GET, "/tenants/acme", None).await;
    assert_eq!(shown["egress"], loopback, "the store keeps the rules");

    // With 127.0.0.0/8 allowed: the data source and the binding register
    // and work; a public address is now outside the tenant's list.
    let (status, body) = admin(&server, PUT, ledger, Some(json!({"url": pg, "schemas": [schema]}))).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = admin(&server, PUT, &format!("{entries}/cap_ping"), Some(entry("cap_ping", &pong_url))).await;
    assert_eq!(status, 201, "{body}");
    let answer =
        admin(&server, PUT, &format!("{entries}/cap_other"), Some(entry("cap_other", "http://93.184.215.14/y"))).await;
    assert!(refused(&answer, "entry.binding.url").contains("allow list"));
    let connection = acme(&server, &settings.data_dir).await;
    let client = PilotageClient::discover(connection).await.unwrap();
    let ping = json!({"steps": [{"id": "p", "kind": "call", "capability": "cap_ping", "with": {}}]});
    let run = client.execute_raw("workflow/v1", json!({"workflow": ping})).await.unwrap();
    assert!(run.outcome.ok, "{:?} {:?}", run.outcome, run.diagnostics);
    assert_eq!(pong_calls.load(Ordering::SeqCst), 1);
    let sql = acme(&server, &settings.data_dir).await;
    let query = json!({"query": format!("SELECT id FROM {schema}.items")});
    let answer = result(sql.call("run_sql", query.clone()).await.unwrap());
    assert_eq!(answer["outcome"]["status"], "success", "{answer}");

    // Narrowed again: the next connection is refused though the
    // registrations stay; the service is not called.
    let (status, _) = admin(&server, PATCH, "/tenants/acme", Some(json!({"egress": {}}))).await;
    assert_eq!(status, 200);
    let run = client.execute_raw("workflow/v1", json!({"workflow": ping})).await.unwrap();
    assert!(!run.outcome.ok, "{:?}", run.outcome);
    let text = serde_json::to_string(&run).unwrap();
    assert!(text.contains("is refused") && text.contains("non-public"), "{text}");
    assert_eq!(pong_calls.load(Ordering::SeqCst), 1, "the refused call sent nothing");
    let answer = result(sql.call("run_sql", query).await.unwrap());
    assert_ne!(answer["outcome"]["status"], "success", "{answer}");
    assert!(answer.to_string().contains("is refused"), "{answer}");
    let (status, body) = admin(&server, reqwest::Method::POST, &format!("{ledger}/refresh"), None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("destination_refused")), "{body}");

    // MQTT on the demo tenant (the deployer's): `$`-topics are refused as
    // filters; with a prefix, filters outside it are refused at deploy and
    // unsubscribed when the prefix moves.
    let answer = admin(&server, PUT, "/tenants/demo/secrets/mqtt:house", Some(json!({"value": loopback_broker}))).await;
    refused(&answer, "value.url");
    let rules = json!({"allow": ["127.0.0.1"], "mqtt_topic_prefix": "home"});
    let (status, body) = admin(&server, PATCH, "/tenants/demo", Some(json!({"egress": rules}))).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) =
        admin(&server, PUT, "/tenants/demo/secrets/mqtt:house", Some(json!({"value": loopback_broker}))).await;
    assert_eq!(status, 200, "{body}");
    let demo = PilotageClient::discover(Connection::http(&server.mcp_url(), None).await.unwrap()).await.unwrap();
    let deploy = |name: &str, topic: &str| {
        json!({"program": {"name": name, "steps": [{"id": "read", "calls": "cap_read_outbox"}],
               "triggers": [{"mqtt": {"broker": "house", "topic": topic}}]}, "mode": "deploy"})
    };
    for topic in ["$SYS/#", "$share/g/home/#", "#", "+/door", "homestead/#"] {
        let run = demo.execute_raw("deployer/v1", deploy("outside", topic)).await.unwrap();
        assert!(!run.outcome.ok, "{topic}: {:?}", run.outcome);
    }
    let run = demo.execute_raw("deployer/v1", deploy("inside", "home/+/door")).await.unwrap();
    assert!(run.outcome.ok, "{:?}", run.outcome);
    assert!(await_subscriptions(&server, 1).await, "the platform subscribed to home/+/door");
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish(broker.port, "home/front/door", &json!({"state": "open"})).await;
    assert_eq!(await_firings(&server, "inside", 1).await.len(), 1);
    let moved = json!({"allow": ["127.0.0.1"], "mqtt_topic_prefix": "garden"});
    let (status, _) = admin(&server, PATCH, "/tenants/demo", Some(json!({"egress": moved}))).await;
    assert_eq!(status, 200);
    assert!(await_subscriptions(&server, 0).await, "the filter outside the new prefix was unsubscribed");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_destinations_are_confined_on_sqlite() {
    confined(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_destinations_are_confined_on_postgres() {
    confined(Backend::Postgres).await;
}
