//! The deployment runtime through the real endpoint (Part II §6.5.7):
//! deploy-mode execute installs, a schedule fires on the deployments'
//! clock as a retained Run fetchable by `run_id`, and a test run never
//! reaches a non-read-only entry although the component (deployer/v1)
//! invokes every step whatever `test_run` says.

use std::time::Duration;

use pilotage_client::{Connection, PilotageClient};
use serde_json::{Value, json};

use crate::tenancy::{admin, two_tenants};

const DEPLOYER: &str = "deployer/v1";

fn instant(text: &str) -> i64 {
    pilotage_engine::clock::parse_rfc3339(text).expect("an RFC 3339 instant")
}

async fn outbox_calls(demo: &str) -> u64 {
    let stats: Value = reqwest::get(format!("{demo}/stats")).await.unwrap().json().await.unwrap();
    stats["calls"]["/outbox/send"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_fire_and_test_runs_that_stay_side_effect_free() {
    let world = two_tenants().await;
    let server = &world.server;
    let demo = format!("http://{}", server.demo_world.as_ref().unwrap().0);
    let deployer = pilotage_test_support::DEPLOYER.to_vec();
    let response = reqwest::Client::new()
        .post(format!("http://{}/admin/v1/tenants/acme/languages", server.addr))
        .bearer_auth(crate::tenancy::ADMIN_TOKEN)
        .header("content-type", "application/wasm")
        .body(deployer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    let write = json!({"id": "cap_write", "kind": "capability", "name": "cap_write", "description": "sends a message",
        "input_schema": {"type": "object"}, "risk": "write",
        "risk_hints": {"readOnly": false, "destructive": false, "openWorld": false},
        "binding": {"url": format!("{demo}/outbox/send")}});
    let (status, report) =
        admin(server, reqwest::Method::POST, "/tenants/acme/catalog/apply", Some(json!({"entries": [write]}))).await;
    assert_eq!(status, 200, "{report}");
    let client = PilotageClient::discover(world.as_("acme", "ann", "pilotage:mcp").await).await.unwrap();
    let program = json!({"name": "nightly", "steps": [{"id": "send", "calls": "cap_write"}],
        "triggers": [{"schedule": {"cron": "0 22 * * *", "time_zone": "Europe/Paris"}}]});

    // Part III §4.4: mode is required for an `execution: both` Language,
    // and only immediate or deploy.
    assert!(client.execute_raw(DEPLOYER, json!({"program": program})).await.is_err());
    assert!(client.execute_raw(DEPLOYER, json!({"program": program, "mode": "later"})).await.is_err());

    // A test run at a simulated 14:03: the component invokes cap_write, the
    // host answers in its place, marks the step simulated, and the clock
    // the component reads is the simulated one.
    let before = outbox_calls(&demo).await;
    let tested = client
        .execute_raw(
            DEPLOYER,
            json!({"program": program, "mode": "deploy", "test_run": true,
                   "input": {"at": "2026-12-03T14:03:00+01:00"}, "trace_level": "full"}),
        )
        .await
        .unwrap();
    assert!(tested.outcome.ok, "{:?}", tested.outcome);
    let step = &tested.trace.as_ref().unwrap().steps[0];
    assert_eq!(step.simulated, Some(true), "{step:?}");
    assert_eq!(step.output, Some(json!({"simulated": true})));
    assert_eq!(tested.output.as_ref().unwrap()["now"], json!(instant("2026-12-03T13:03:00Z")));
    assert_eq!(outbox_calls(&demo).await, before, "a test run reached a non-read-only entry");
    // Issue 27 item 4. The admin API refuses an entry whose risk label and
    // hints contradict (Part II §5.3), naming the field ...
    for (risk, hints) in [
        ("destructive", json!({"readOnly": true, "destructive": true, "openWorld": false})),
        ("destructive", json!({"readOnly": true, "destructive": false, "openWorld": false})),
        ("write", json!({"readOnly": true, "destructive": false, "openWorld": false})),
        ("safe", json!({"readOnly": false, "destructive": false, "openWorld": false})),
    ] {
        let mut contradictory = write.clone();
        contradictory["id"] = json!("cap_contradictory");
        contradictory["risk"] = json!(risk);
        contradictory["risk_hints"] = hints;
        let (status, body) = admin(
            server,
            reqwest::Method::POST,
            "/tenants/acme/catalog/apply",
            Some(json!({"entries": [contradictory]})),
        )
        .await;
        assert_eq!(status, 400, "{risk}: {body}");
        assert_eq!(body["error"]["field"], "entries[0].risk", "{body}");
    }
    // ... and a test run performs only an entry read-only by both its label
    // and its hints. One stored before that check (put in place here as an
    // older release could have stored it) says `destructive` with
    // `readOnly: true`: the host answers in its place. A consistent
    // read-only entry bound to the same endpoint is performed.
    let bound = |id: &str, risk: &str| {
        let mut entry = write.clone();
        entry["id"] = json!(id);
        entry["name"] = json!(id);
        entry["risk"] = json!(risk);
        entry["risk_hints"] = json!({"readOnly": true, "destructive": false, "openWorld": false});
        let binding = serde_json::from_value(entry["binding"].clone()).unwrap();
        pilotage_engine::catalog::StoredEntry::new(serde_json::from_value(entry).unwrap(), Vec::new(), Some(binding))
    };
    let acme = server.platform.tenant("acme").unwrap();
    acme.catalog()
        .with(|catalog| catalog.apply(vec![bound("cap_mislabelled", "destructive"), bound("cap_peek", "safe")], &[]));
    let peeking = json!({"name": "peeking", "steps": [{"id": "mislabelled", "calls": "cap_mislabelled"}, {"id": "peek", "calls": "cap_peek"}]});
    let tested = client
        .execute_raw(DEPLOYER, json!({"program": peeking, "mode": "deploy", "test_run": true, "trace_level": "full"}))
        .await
        .unwrap();
    let steps = &tested.trace.as_ref().unwrap().steps;
    assert_eq!(steps[0].simulated, Some(true), "the mislabelled entry is not performed: {steps:?}");
    assert_eq!(steps[0].output, Some(json!({"simulated": true})));
    assert_eq!(steps[1].simulated, None, "the read-only entry is performed: {steps:?}");
    assert_eq!(outbox_calls(&demo).await, before + 1, "only cap_peek reached the endpoint");
    let before = outbox_calls(&demo).await;
    acme.catalog().with(|catalog| catalog.apply(Vec::new(), &["cap_mislabelled".to_owned(), "cap_peek".to_owned()]));

    // A malformed simulated clock is a request error.
    assert!(
        client
            .execute_raw(
                DEPLOYER,
                json!({"program": program, "mode": "deploy", "test_run": true, "input": {"at": "14:03"}})
            )
            .await
            .is_err()
    );

    // Deploy on a frozen clock; the 22:00 Paris tick is 21:00 UTC.
    let clock = server.platform.clock().clone();
    clock.freeze_at(instant("2026-12-03T20:59:00Z"));
    let deployed = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    assert!(deployed.outcome.ok, "{:?}", deployed.outcome);
    let output = deployed.output.unwrap();
    assert_eq!(output["deployment"], "nightly");
    assert_eq!(output["version"], 1);
    assert_eq!(output["next_due"], "2026-12-03T21:00:00.000Z");
    assert_eq!(outbox_calls(&demo).await, before, "deploying runs nothing");

    // Nothing fires before the tick; the tick fires once.
    clock.advance(Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.platform.store().firings_of("acme", "nightly", 10).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(60));
    let mut firings = Vec::new();
    for _ in 0..100 {
        firings = server.platform.store().firings_of("acme", "nightly", 10).await.unwrap();
        if !firings.is_empty() && outbox_calls(&demo).await > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(firings.len(), 1, "{firings:?}");
    assert_eq!(firings[0].instance, format!("schedule:{}", instant("2026-12-03T21:00:00Z")));
    let record = server.platform.store().run_get(&firings[0].run_id).await.unwrap();
    assert_eq!(outbox_calls(&demo).await, before + 1, "the firing really invoked cap_write: {record:?}");
    // The firing's Run is retained and fetchable by its run_id.
    let mut fetched = None;
    for _ in 0..100 {
        if let Ok(trace) = client.trace(DEPLOYER, &firings[0].run_id, Some("full")).await {
            fetched = Some(trace);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fetched = fetched.expect("the firing's Run is fetchable");
    assert_eq!(fetched.trace.steps[0].calls.as_deref(), Some("cap_write"));
    assert_eq!(fetched.trace.steps[0].simulated, None);
    // The demo outbox refuses this body (HTTP 400): the answer came from the
    // real endpoint.
    assert!(fetched.trace.steps[0].outcome.error.as_deref().unwrap_or_default().contains("HTTP 400"));
    let input = &fetched.trace.steps[0].input.as_ref().unwrap()["input"];
    assert_eq!(input["trigger"]["kind"], "schedule");
    assert_eq!(input["event"]["due"], "2026-12-03T21:00:00.000Z");

    // Deploying the same name again replaces it.
    let again = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    assert_eq!(again.output.unwrap()["version"], 2);

    // An installation whose webhook source is not registered is refused,
    // and nothing is installed.
    let hooked = json!({"name": "hooked", "steps": [], "triggers": [{"webhook": "home"}]});
    let refused = client.execute_raw(DEPLOYER, json!({"program": hooked, "mode": "deploy"})).await.unwrap();
    assert!(!refused.outcome.ok);
    assert!(refused.outcome.error.unwrap().contains("webhook:home"));
    assert!(server.platform.store().deployment_get("acme", "hooked").await.unwrap().is_none());
}

/// A mosquitto broker of the test's own on a free loopback port, stopped
/// when dropped.
pub(crate) struct Broker {
    child: std::process::Child,
    pub(crate) port: u16,
    _dir: std::path::PathBuf,
}

impl Broker {
    pub(crate) fn start() -> Broker {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(crate::endpoint::unique("mosquitto"));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("mosquitto.conf");
        std::fs::write(&config, format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"))
            .unwrap();
        let program = pilotage_test_support::required_program("mosquitto", "mosquitto");
        let mut child = std::process::Command::new(program)
            .arg("-c")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("mosquitto starts");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Broker { child, port, _dir: dir };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("mosquitto did not listen on {port}");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server comes to hold exactly `count` MQTT subscriptions
/// within 15 s (they follow the store every few seconds).
pub(crate) async fn await_subscriptions(server: &pilotage_server::start::Server, count: usize) -> bool {
    for _ in 0..300 {
        if server.platform.deployments().mqtt_held().await.len() == count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Publishes one message with QoS 1 and waits for the broker's ack.
pub(crate) async fn publish(port: u16, topic: &str, payload: &Value) {
    let mut options = rumqttc::MqttOptions::new(crate::endpoint::unique("publisher"), "127.0.0.1", port);
    options.set_keep_alive(Duration::from_secs(5));
    let (client, mut events) = rumqttc::AsyncClient::new(options, 10);
    client.publish(topic, rumqttc::QoS::AtLeastOnce, false, payload.to_string()).await.unwrap();
    let acked = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let rumqttc::Event::Incoming(rumqttc::Packet::PubAck(_)) = events.poll().await.unwrap() {
                break;
            }
        }
    })
    .await;
    assert!(acked.is_ok(), "the broker acknowledged the message");
    let _ = client.disconnect().await;
}

/// A signed webhook delivery; returns the status and body.
async fn deliver(
    server: &pilotage_server::start::Server,
    source: &str,
    key: &[u8],
    sent: i64,
    body: &Value,
) -> (u16, Value) {
    deliver_encoded(server, source, key, sent, body, |signature| signature).await
}

/// A signed webhook delivery whose signature header `encode` rewrites
/// (re-casing its hex, as a replaying attacker would).
async fn deliver_encoded(
    server: &pilotage_server::start::Server,
    source: &str,
    key: &[u8],
    sent: i64,
    body: &Value,
    encode: impl Fn(String) -> String,
) -> (u16, Value) {
    let body = body.to_string();
    let signature = encode(pilotage_server::deploy::webhook::sign(key, sent, body.as_bytes()));
    let response = reqwest::Client::new()
        .post(format!("http://{}/events/demo/{source}", server.addr))
        .header("pilotage-timestamp", sent.to_string())
        .header("pilotage-signature", signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn firings(server: &pilotage_server::start::Server, name: &str) -> Vec<pilotage_store::FiringRow> {
    server.platform.store().firings_of("demo", name, 100).await.unwrap()
}

/// Waits until `name` has `count` firings and their Runs are stored.
pub(crate) async fn await_firings(
    server: &pilotage_server::start::Server,
    name: &str,
    count: usize,
) -> Vec<pilotage_store::FiringRow> {
    for _ in 0..200 {
        let seen = firings(server, name).await;
        let mut stored = 0;
        for firing in &seen {
            if server.platform.store().run_get(&firing.run_id).await.unwrap().is_some() {
                stored += 1;
            }
        }
        if seen.len() >= count && stored == seen.len() {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    firings(server, name).await
}

const METRICS_TOKEN: &str = "metrics-token-for-tests";

/// Settings of a dev-auth server (demo tenant, SQLite or PostgreSQL) with
/// the admin API on and deployer/v1 served from its file.
pub(crate) async fn deployer_settings(backend: crate::endpoint::Backend) -> pilotage_server::settings::Settings {
    let mut settings = crate::endpoint::settings(backend).await;
    settings.admin_token = Some(crate::tenancy::ADMIN_TOKEN.to_owned());
    settings.languages = vec![pilotage_test_support::guest_file("deployer.wasm")];
    settings
}

/// The server's metrics exposition.
async fn metrics(server: &pilotage_server::start::Server) -> String {
    crate::support::scrape(server.addr, METRICS_TOKEN).await
}

async fn dev_admin(
    server: &pilotage_server::start::Server,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    crate::tenancy::admin(server, method, path, body).await
}

/// Operating deployments and every trigger kind through the endpoint, on
/// one store backend, across a restart: the admin API lists, shows,
/// disables, enables and removes; agents see each deployment as a catalog
/// entry carrying its body's risk; a signed webhook delivery fires once
/// (stale, forged and replayed deliveries refused); an MQTT message on a
/// real broker fires; a restart keeps the deployments, and a schedule tick
/// missed while the server was down fires once, late.
async fn operated_fired_and_restarted(backend: crate::endpoint::Backend) {
    let broker = Broker::start();
    let mut settings = deployer_settings(backend).await;
    settings.metrics_token = Some(METRICS_TOKEN.to_owned());
    let server = crate::endpoint::server(settings.clone()).await;
    let demo = format!("http://{}", server.demo_world.as_ref().unwrap().0);
    let key = b"door-key-0123456789";

    // Sources are the tenant's secrets; a malformed broker secret is refused.
    let path = "/tenants/demo/secrets/webhook:door";
    let (status, body) =
        dev_admin(&server, reqwest::Method::PUT, path, Some(json!({"value": "door-key-0123456789"}))).await;
    assert_eq!(status, 200, "{body}");
    let path = "/tenants/demo/secrets/mqtt:house";
    let (status, body) = dev_admin(&server, reqwest::Method::PUT, path, Some(json!({"value": "not json"}))).await;
    assert_eq!((status, body["error"]["field"].as_str()), (400, Some("value")), "{body}");
    let broker_secret = json!({"url": format!("mqtt://127.0.0.1:{}", broker.port)}).to_string();
    let (status, body) = dev_admin(&server, reqwest::Method::PUT, path, Some(json!({"value": broker_secret}))).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) =
        dev_admin(&server, reqwest::Method::PUT, "/tenants/demo/secrets/data-source:x", Some(json!({"value": "x"})))
            .await;
    assert_eq!(status, 400, "the platform's own secret names are not writable");

    let clock = server.platform.clock().clone();
    clock.freeze_at(instant("2030-01-01T20:59:00Z"));
    let client = PilotageClient::discover(Connection::http(&server.mcp_url(), None).await.unwrap()).await.unwrap();
    let hourly = json!({"name": "hourly", "steps": [{"id": "flag", "calls": "cap_flag_order"}],
        "triggers": [{"schedule": {"cron": "0 * * * *", "time_zone": "UTC"}}]});
    let door = json!({"name": "door", "steps": [{"id": "flag", "calls": "cap_flag_order"}],
        "triggers": [{"webhook": "door"}, {"mqtt": {"broker": "house", "topic": "home/+/door"}}]});
    // A second filter that overlaps the first: the broker sends a message
    // matching both through each subscription, and each deployment must
    // still fire once.
    let everything = json!({"name": "everything", "steps": [{"id": "read", "calls": "cap_read_outbox"}],
        "triggers": [{"mqtt": {"broker": "house", "topic": "home/#"}}]});
    for program in [&hourly, &door, &everything] {
        let deployed = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
        assert!(deployed.outcome.ok, "{:?}", deployed.outcome);
    }

    // Operators see them; agents see them as catalog entries with the
    // body's risk (cap_flag_order writes).
    let (status, list) = dev_admin(&server, reqwest::Method::GET, "/tenants/demo/deployments", None).await;
    assert_eq!(status, 200);
    let names: Vec<&str> =
        list["deployments"].as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["door", "everything", "hourly"]);
    let entry = client.catalog_get(DEPLOYER, "deployment:door").await.unwrap().entry;
    assert_eq!(entry.kind, "deployer_deployment");
    assert_eq!(entry.risk, "write");
    assert!(!entry.risk_hints.read_only);
    assert!(entry.input_schema.is_none(), "a deployment is not callable");
    assert!(entry.tags.iter().any(|tag| tag == "webhook") && entry.tags.iter().any(|tag| tag == "mqtt"));
    let (status, _) = dev_admin(&server, reqwest::Method::GET, "/tenants/demo/deployments/nosuch", None).await;
    assert_eq!(status, 404);

    // Webhooks: a forged, a stale and an unknown-source delivery are
    // refused and fire nothing; a signed one fires once; its replay is
    // refused.
    let now = chrono::Utc::now().timestamp();
    let event = json!({"door": "front", "state": "open"});
    assert_eq!(deliver(&server, "door", b"wrong-key", now, &event).await.0, 401);
    assert_eq!(deliver(&server, "door", key, now - 3_600, &event).await.0, 401);
    // An unknown source and an unknown tenant answer exactly like a wrong
    // key: the unauthenticated endpoint names no tenant (issue 27 item 6).
    let wrong_key = deliver(&server, "door", b"wrong-key", now, &event).await;
    let unknown_source = deliver(&server, "garage", key, now, &event).await;
    assert_eq!(unknown_source, wrong_key);
    let body = event.to_string();
    let unknown_tenant = reqwest::Client::new()
        .post(format!("http://{}/events/nosuch-tenant/door", server.addr))
        .header("pilotage-timestamp", now.to_string())
        .header("pilotage-signature", pilotage_server::deploy::webhook::sign(key, now, body.as_bytes()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(unknown_tenant.status().as_u16(), 401);
    assert_eq!(unknown_tenant.json::<Value>().await.unwrap(), wrong_key.1);
    let huge = json!({"padding": "x".repeat(pilotage_server::deploy::webhook::MAX_EVENT_BYTES)});
    assert_eq!(deliver(&server, "door", key, now, &huge).await.0, 413, "an oversized event is refused");
    let (status, accepted) = deliver(&server, "door", key, now, &event).await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["fires"], json!(["door"]));
    assert_eq!(deliver(&server, "door", key, now, &event).await.0, 409, "a replay is refused");
    // Every encoding of the same MAC is the same delivery (issue 27 item
    // 1): upper-case and mixed-case hex are replays too, not new firings.
    let upper = |signature: String| format!("sha256={}", signature["sha256=".len()..].to_ascii_uppercase());
    let mixed = |signature: String| {
        let digits: String = signature["sha256=".len()..]
            .chars()
            .enumerate()
            .map(|(index, c)| if index % 3 == 0 { c.to_ascii_uppercase() } else { c })
            .collect();
        format!("sha256={digits}")
    };
    assert_eq!(deliver_encoded(&server, "door", key, now, &event, upper).await.0, 409, "an upper-cased replay");
    assert_eq!(deliver_encoded(&server, "door", key, now, &event, mixed).await.0, 409, "a mixed-case replay");
    let fired = await_firings(&server, "door", 1).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert!(fired[0].instance.starts_with("webhook:"), "{fired:?}");
    let trace = client.trace(DEPLOYER, &fired[0].run_id, Some("full")).await.unwrap().trace;
    let input = &trace.steps[0].input.as_ref().unwrap()["input"];
    assert_eq!((&input["trigger"]["kind"], &input["event"]), (&json!("webhook"), &event));
    assert_eq!(trace.steps[0].calls.as_deref(), Some("cap_flag_order"));

    // MQTT: a message on a matching topic fires; one on another topic
    // does not. The subscription follows the store within a few seconds.
    assert!(await_subscriptions(&server, 2).await, "the platform subscribed to home/+/door and home/#");
    tokio::time::sleep(Duration::from_millis(300)).await;
    publish(broker.port, "home/garden/gate", &json!({"state": "open"})).await;
    publish(broker.port, "home/front/door", &json!({"state": "open"})).await;
    let fired = await_firings(&server, "door", 2).await;
    assert_eq!(fired.len(), 2, "{fired:?}");
    let mqtt = fired.iter().find(|firing| firing.instance.starts_with("mqtt:")).expect("an MQTT firing");
    let trace = client.trace(DEPLOYER, &mqtt.run_id, Some("full")).await.unwrap().trace;
    let input = &trace.steps[0].input.as_ref().unwrap()["input"];
    assert_eq!(input["event"], json!({"topic": "home/front/door", "payload": {"state": "open"}}));
    let everything = await_firings(&server, "everything", 2).await;
    assert_eq!(everything.len(), 2, "home/# saw both messages: {everything:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(firings(&server, "door").await.len(), 2, "home/garden/gate fired nothing on home/+/door");
    assert_eq!(firings(&server, "everything").await.len(), 2, "each message fired home/# once");

    // Disabled: its tick passes without a firing, and the agent's entry
    // says so. Enabled again: the next tick fires; the missed one never.
    let (status, view) =
        dev_admin(&server, reqwest::Method::POST, "/tenants/demo/deployments/hourly/disable", None).await;
    assert_eq!((status, &view["enabled"]), (200, &json!(false)), "{view}");
    let entry = client.catalog_get(DEPLOYER, "deployment:hourly").await.unwrap().entry;
    assert!(entry.tags.iter().any(|tag| tag == "disabled"), "{entry:?}");
    clock.advance(Duration::from_secs(120));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(firings(&server, "hourly").await.is_empty(), "a disabled deployment fired");
    let (status, view) =
        dev_admin(&server, reqwest::Method::POST, "/tenants/demo/deployments/hourly/enable", None).await;
    assert_eq!((status, &view["next_due"]), (200, &json!("2030-01-01T22:00:00.000Z")), "{view}");
    clock.freeze_at(instant("2030-01-01T22:00:00Z"));
    let fired = await_firings(&server, "hourly", 1).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    let (status, shown) =
        dev_admin(&server, reqwest::Method::GET, "/tenants/demo/deployments/hourly?firings=5", None).await;
    assert_eq!(status, 200);
    assert_eq!(shown["firings"][0]["run_id"], json!(fired[0].run_id));
    assert_eq!(shown["firings"][0]["status"], "error", "the demo refuses this body: {shown}");
    assert!(shown["body"].as_str().unwrap().contains("cap_flag_order"));
    let flagged = {
        let stats: Value = reqwest::get(format!("{demo}/stats")).await.unwrap().json().await.unwrap();
        stats["calls"]["/orders/flag"].as_u64().unwrap_or(0)
    };
    assert_eq!(flagged, 3, "webhook, MQTT and schedule firings each invoked cap_flag_order once");
    // The metrics moved with what happened.
    let exposition = metrics(&server).await;
    for line in [
        "pilotage_firings_total{result=\"failed\",trigger=\"webhook\"} 1",
        "pilotage_firings_total{result=\"failed\",trigger=\"mqtt\"} 1",
        "pilotage_firings_total{result=\"failed\",trigger=\"schedule\"} 1",
        "pilotage_webhook_deliveries_total{result=\"accepted\"} 1",
        "pilotage_webhook_deliveries_total{result=\"replayed\"} 3",
        "pilotage_webhook_deliveries_total{result=\"stale\"} 1",
        "pilotage_webhook_deliveries_total{result=\"unauthorized\"} 2",
        "pilotage_webhook_deliveries_total{result=\"unknown_source\"} 2",
        "pilotage_firing_delay_seconds_count{trigger=\"schedule\"} 1",
        "pilotage_firings_total{result=\"ok\",trigger=\"mqtt\"} 2",
        "pilotage_deployments 3",
        "pilotage_mqtt_subscriptions 2",
    ] {
        assert!(exposition.lines().any(|l| l == line), "{line} is exposed:\n{exposition}");
    }
    client.close().await;
    server.stop().await;

    // Down from 22:00 to 01:30: at restart the deployments are in place,
    // the agents' entries too, and the missed ticks fire once, for 01:00,
    // marked late; next comes 02:00.
    let server = crate::endpoint::server(settings).await;
    server.platform.clock().freeze_at(instant("2030-01-02T01:30:00Z"));
    let fired = await_firings(&server, "hourly", 2).await;
    assert_eq!(fired.len(), 2, "{fired:?}");
    assert_eq!(fired[0].instance, format!("schedule:{}", instant("2030-01-02T01:00:00Z")));
    let client = PilotageClient::discover(Connection::http(&server.mcp_url(), None).await.unwrap()).await.unwrap();
    let trace = client.trace(DEPLOYER, &fired[0].run_id, Some("full")).await.unwrap().trace;
    assert_eq!(trace.steps[0].input.as_ref().unwrap()["input"]["event"]["late"], true);
    assert!(client.catalog_get(DEPLOYER, "deployment:door").await.is_ok());
    let (_, view) = dev_admin(&server, reqwest::Method::GET, "/tenants/demo/deployments/hourly", None).await;
    assert_eq!(view["next_due"], "2030-01-02T02:00:00.000Z");

    // The CLI drives the same API.
    let cli = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
            .args(args)
            .args(["--server", &format!("http://{}", server.addr), "--admin-token", crate::tenancy::ADMIN_TOKEN])
            .output()
            .unwrap();
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let (ok, listed) = cli(&["deployment", "ls", "demo"]);
    assert!(ok && listed.contains("\"hourly\"") && listed.contains("\"everything\""), "{listed}");
    let (ok, shown) = cli(&["deployment", "get", "demo", "hourly", "--firings", "1"]);
    assert!(ok && shown.contains(&fired[0].run_id), "{shown}");
    let (ok, disabled) = cli(&["deployment", "disable", "demo", "door"]);
    assert!(ok && disabled.contains("\"enabled\": false"), "{disabled}");
    assert!(cli(&["deployment", "enable", "demo", "door"]).0);
    assert!(!cli(&["deployment", "rm", "demo", "nosuch"]).0, "removing what does not exist fails");
    let (ok, secrets) = cli(&["secret", "ls", "demo"]);
    assert!(ok && secrets.contains("webhook:door") && !secrets.contains("door-key"), "{secrets}");

    // Removed: gone for operators and agents, and its next tick fires
    // nothing.
    let (status, _) = dev_admin(&server, reqwest::Method::DELETE, "/tenants/demo/deployments/hourly", None).await;
    assert_eq!(status, 204);
    let (status, _) = dev_admin(&server, reqwest::Method::DELETE, "/tenants/demo/deployments/hourly", None).await;
    assert_eq!(status, 404);
    assert!(client.catalog_get(DEPLOYER, "deployment:hourly").await.is_err());
    server.platform.clock().freeze_at(instant("2030-01-02T02:00:30Z"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(firings(&server, "hourly").await.len(), 2, "a removed deployment fired");
    let (_, audit) = dev_admin(&server, reqwest::Method::GET, "/audit", None).await;
    let actions: Vec<&str> = audit["audit"].as_array().unwrap().iter().filter_map(|r| r["action"].as_str()).collect();
    for action in ["deployment.disable", "deployment.enable", "deployment.delete"] {
        assert!(actions.contains(&action), "{action} is audited: {actions:?}");
    }
    client.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operated_fired_and_restarted_on_sqlite() {
    operated_fired_and_restarted(crate::endpoint::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operated_fired_and_restarted_on_postgres() {
    operated_fired_and_restarted(crate::endpoint::Backend::Postgres).await;
}

/// Daylight-saving changes through the endpoint (Europe/Paris): 02:30 does
/// not exist on 2026-03-29, so the tick comes at 03:00 local (01:00 UTC);
/// 02:30 happens twice on 2026-10-25, and fires once, the next tick being
/// the next day's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_across_daylight_saving_changes() {
    let settings = deployer_settings(crate::endpoint::Backend::Sqlite).await;
    let server = crate::endpoint::server(settings).await;
    let clock = server.platform.clock().clone();
    let client = PilotageClient::discover(Connection::http(&server.mcp_url(), None).await.unwrap()).await.unwrap();
    let program = json!({"name": "half-past-two", "steps": [{"id": "read", "calls": "cap_read_outbox"}],
        "triggers": [{"schedule": {"cron": "30 2 * * *", "time_zone": "Europe/Paris"}}]});

    clock.freeze_at(instant("2026-03-28T23:00:00Z"));
    let deployed = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    assert_eq!(deployed.output.unwrap()["next_due"], "2026-03-29T01:00:00.000Z", "the gap's 02:30 is 03:00 CEST");
    clock.freeze_at(instant("2026-03-29T01:00:00Z"));
    let fired = await_firings(&server, "half-past-two", 1).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].instance, format!("schedule:{}", instant("2026-03-29T01:00:00Z")));

    // Removed before the clock jumps to October (else its missed ticks
    // would fire once, late), then deployed again.
    let path = "/tenants/demo/deployments/half-past-two";
    assert_eq!(dev_admin(&server, reqwest::Method::DELETE, path, None).await.0, 204);
    clock.freeze_at(instant("2026-10-24T22:00:00Z"));
    let deployed = client.execute_raw(DEPLOYER, json!({"program": program, "mode": "deploy"})).await.unwrap();
    assert_eq!(deployed.output.unwrap()["next_due"], "2026-10-25T00:30:00.000Z", "the first 02:30, CEST");
    clock.freeze_at(instant("2026-10-25T00:30:00Z"));
    let fired = await_firings(&server, "half-past-two", 2).await;
    assert_eq!(fired.len(), 2);
    // The second 02:30 (01:30 UTC, CET) does not fire.
    clock.freeze_at(instant("2026-10-25T01:30:30Z"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(firings(&server, "half-past-two").await.len(), 2, "the repeated 02:30 fired twice");
    let (_, view) = dev_admin(&server, reqwest::Method::GET, path, None).await;
    assert_eq!(view["next_due"], "2026-10-26T01:30:00.000Z", "{view}");
    client.close().await;
    server.stop().await;
}

/// The tenant's quotas bound deployments: `max_deployments` refuses a new
/// name (the installation Run's outcome says which quota; replacing an
/// existing name still works), and `max_firings_per_minute` drops the
/// firings past it (counted in the metrics).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_bound_deployments_and_firings() {
    let mut settings = deployer_settings(crate::endpoint::Backend::Sqlite).await;
    settings.metrics_token = Some(METRICS_TOKEN.to_owned());
    let server = crate::endpoint::server(settings).await;
    let quotas = json!({"quotas": {"max_deployments": 1, "max_firings_per_minute": 2}});
    let (status, body) = dev_admin(&server, reqwest::Method::PATCH, "/tenants/demo", Some(quotas)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) =
        dev_admin(&server, reqwest::Method::PUT, "/tenants/demo/secrets/webhook:bell", Some(json!({"value": "k"})))
            .await;
    assert_eq!(status, 200);
    let client = PilotageClient::discover(Connection::http(&server.mcp_url(), None).await.unwrap()).await.unwrap();
    let bell = |name: &str| {
        json!({"program": {"name": name, "steps": [{"id": "read", "calls": "cap_read_outbox"}],
            "triggers": [{"webhook": "bell"}]}, "mode": "deploy"})
    };
    assert!(client.execute_raw(DEPLOYER, bell("bell")).await.unwrap().outcome.ok);
    let refused = client.execute_raw(DEPLOYER, bell("second")).await.unwrap();
    assert!(!refused.outcome.ok);
    assert!(refused.outcome.error.unwrap_or_default().contains("max_deployments"));
    assert!(client.execute_raw(DEPLOYER, bell("bell")).await.unwrap().outcome.ok, "replacing is not a new deployment");

    let now = chrono::Utc::now().timestamp();
    for ring in 0..3 {
        let (status, _) = deliver(&server, "bell", b"k", now, &json!({"ring": ring})).await;
        assert_eq!(status, 202);
        // One at a time, so the quota's count sees the previous claims.
        await_firings(&server, "bell", (ring + 1).min(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(firings(&server, "bell").await.len(), 2, "the third ring within a minute is dropped");
    let exposition = metrics(&server).await;
    assert!(exposition.lines().any(|l| l == "pilotage_firings_total{result=\"dropped\",trigger=\"webhook\"} 1"));
    assert!(exposition.lines().any(|l| l == "pilotage_firings_total{result=\"ok\",trigger=\"webhook\"} 2"));
    client.close().await;
    server.stop().await;
}

/// Issue 27 item 9: every quota's count and its claim are one step in the
/// store. Six deploys of new names at once under `max_deployments` = 2
/// store exactly two; twelve signed deliveries at once under
/// `max_firings_per_minute` = 3 fire each deployment exactly three times
/// (once four fired: the count and the claim were two steps).
async fn quotas_hold_under_concurrent_bursts(backend: crate::endpoint::Backend) {
    let mut settings = deployer_settings(backend).await;
    settings.metrics_token = Some(METRICS_TOKEN.to_owned());
    let server = crate::endpoint::server(settings).await;
    let quotas = json!({"quotas": {"max_deployments": 2, "max_firings_per_minute": 3}});
    let (status, body) = dev_admin(&server, reqwest::Method::PATCH, "/tenants/demo", Some(quotas)).await;
    assert_eq!(status, 200, "{body}");
    let (status, _) =
        dev_admin(&server, reqwest::Method::PUT, "/tenants/demo/secrets/webhook:bell", Some(json!({"value": "k"})))
            .await;
    assert_eq!(status, 200);
    let client = PilotageClient::discover(Connection::http(&server.mcp_url(), None).await.unwrap()).await.unwrap();
    let bell = |name: String| {
        json!({"program": {"name": name, "steps": [{"id": "read", "calls": "cap_read_outbox"}],
            "triggers": [{"webhook": "bell"}]}, "mode": "deploy"})
    };
    let deploys = (0..6).map(|n| client.execute_raw(DEPLOYER, bell(format!("burst-{n}"))));
    let outcomes: Vec<_> = futures::future::join_all(deploys).await.into_iter().map(|r| r.unwrap().outcome).collect();
    let stored = outcomes.iter().filter(|outcome| outcome.ok).count();
    assert_eq!(stored, 2, "{outcomes:?}");
    for refused in outcomes.iter().filter(|outcome| !outcome.ok) {
        assert!(refused.error.as_deref().unwrap_or_default().contains("max_deployments"), "{refused:?}");
    }
    let names: Vec<String> =
        server.platform.store().deployments_of_tenant("demo").await.unwrap().into_iter().map(|row| row.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");

    let now = chrono::Utc::now().timestamp();
    let bodies: Vec<Value> = (0..12).map(|ring| json!({"ring": ring})).collect();
    let rings = bodies.iter().map(|body| deliver(&server, "bell", b"k", now, body));
    for (status, body) in futures::future::join_all(rings).await {
        assert_eq!(status, 202, "{body}");
    }
    for name in &names {
        await_firings(&server, name, 3).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for name in &names {
        assert_eq!(firings(&server, name).await.len(), 3, "{name}: the quota holds under a burst");
    }
    let exposition = metrics(&server).await;
    assert!(
        exposition.lines().any(|l| l == "pilotage_firings_total{result=\"dropped\",trigger=\"webhook\"} 18"),
        "{exposition}"
    );
    client.close().await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_hold_under_concurrent_bursts_on_sqlite() {
    quotas_hold_under_concurrent_bursts(crate::endpoint::Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_hold_under_concurrent_bursts_on_postgres() {
    quotas_hold_under_concurrent_bursts(crate::endpoint::Backend::Postgres).await;
}
