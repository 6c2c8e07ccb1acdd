//! The node's capacity through the real endpoint (issue: "Runs that wait
//! cost nothing"; Part II §10.1, Part III §7.2; docs/architecture.md,
//! "Capacity").
//!
//! A saturated node refuses a Run with a retryable answer on the spec's
//! channel (`resource_exhausted`, `retry_after_ms`, nothing ran, the key
//! free) and `/readyz` says it is saturated; a freed place goes to the
//! quiet tenant before a busy tenant's queued Runs, and validations never
//! wait behind Runs; guests that spin without end do not starve the
//! runtime, and the deadline and fuel still stop them on the async path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::endpoint::{Backend, client, client_as, ok, request_error, server, settings};
use crate::tasks::{slow_entry, slow_service};
use crate::tenancy::{ADMIN_TOKEN, admin};

/// A one-step workflow calling `capability` with `n`, not stored.
fn one_call(capability: &str, n: u32) -> Value {
    json!({"workflow": {
        "steps": [{"id": "effect", "kind": "call", "capability": capability, "with": {"n": n}}],
        "output": {"done": true}},
        "store": false})
}

/// The Runs' pool of the server at `addr` as `/readyz` reports it.
async fn readyz(addr: &std::net::SocketAddr) -> (u16, String) {
    let response = reqwest::get(format!("http://{addr}/readyz")).await.expect("the server answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

/// A service answering at once, which records how many calls the slow
/// service had seen when it was called (`u32::MAX` until then): its URL
/// and that record.
async fn fast_service(slow_calls: Arc<AtomicU32>) -> (String, Arc<AtomicU32>) {
    let seen = Arc::new(AtomicU32::new(u32::MAX));
    let record = seen.clone();
    let router = axum::Router::new().route(
        "/fast",
        axum::routing::post(move || {
            record.store(slow_calls.load(Ordering::SeqCst), Ordering::SeqCst);
            async { axum::Json(json!({"effect": 0})) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/fast", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, seen)
}

/// Polls until `calls` reaches `count` (the slow service holds that many
/// invocations), at most 10 s.
async fn until_held(calls: &AtomicU32, count: u32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while calls.load(Ordering::SeqCst) < count {
        assert!(std::time::Instant::now() < deadline, "{} of {count} calls arrived", calls.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Both polarities of a full execution pool: two Runs hold it, a third is
/// refused after its wait with `resource_exhausted` and `retry_after_ms`
/// (nothing ran: the service saw two calls; its idempotency key stays
/// free), `/readyz` answers 503 `saturated` and the metrics count the
/// refusal; once the two end the node is ready again and the same request
/// with the same key runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_node_refuses_a_run_with_a_retryable_answer_and_says_so() {
    let mut configured = settings(Backend::Sqlite).await;
    configured.admin_token = Some(ADMIN_TOKEN.to_owned());
    configured.metrics_token = Some("capacity-metrics-token-0123".to_owned());
    configured.capacity.run_instances = 2;
    configured.capacity.nested_percent = 0;
    configured.capacity.run_wait_ms = 400;
    let server = server(configured).await;
    let (url, calls) = slow_service(Duration::from_millis(2_500)).await;
    let (status, body) =
        admin(&server, reqwest::Method::PUT, "/tenants/demo/catalog/entries/cap_slow_effect", Some(slow_entry(&url)))
            .await;
    assert!(status < 300, "{status} {body}");
    let client = Arc::new(client(&server.mcp_url()).await);
    assert_eq!(readyz(&server.addr).await.0, 200);

    let holders: Vec<_> = (1..=2)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move { ok(&client, "run_workflow", one_call("cap_slow_effect", n)).await })
        })
        .collect();
    until_held(&calls, 2).await;
    let (status, body) = readyz(&server.addr).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("saturated") && body.contains("execution: 2 of 2 calls"), "{body}");

    let mut asked = one_call("cap_slow_effect", 3);
    asked["idempotency_key"] = json!("capacity-key-1");
    let refused = ok(&client, "run_workflow", asked.clone()).await;
    crate::support::assert_schema("ExecuteResponse", &refused);
    assert_eq!(refused["outcome"]["status"], "resource_exhausted", "{refused}");
    assert_eq!(refused["outcome"]["ok"], false);
    let message = refused["outcome"]["error"].as_str().unwrap();
    assert!(message.contains("nothing ran") && message.contains("retry in about"), "{message}");
    assert!(refused["retry_after_ms"].as_u64().is_some_and(|ms| ms >= 100), "{refused}");
    assert!(refused.get("trace").is_none(), "a Run that did not start has no trace: {refused}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the refused Run invoked nothing");

    let metrics = crate::support::scrape(server.addr, "capacity-metrics-token-0123").await;
    for line in [
        "pilotage_capacity_in_use{pool=\"execution\"} 2",
        "pilotage_capacity_limit{pool=\"execution\"} 2",
        "pilotage_capacity_refusals_total{pool=\"execution\",reason=\"waited\"} 1",
        "pilotage_tenant_capacity_in_use{pool=\"execution\",tenant=\"demo\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} in:\n{metrics}");
    }

    for holder in holders {
        let done = holder.await.unwrap();
        assert_eq!(done["outcome"]["status"], "success", "{done}");
    }
    assert_eq!(readyz(&server.addr).await, (200, "ready\n".to_owned()));
    // The refusal held no key: the same request with the same key runs.
    let ran = ok(&client, "run_workflow", asked).await;
    assert_eq!(ran["outcome"]["status"], "success", "{ran}");
    assert!(ran.get("retry_after_ms").is_none(), "{ran}");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    server.stop().await;
}

/// A busy tenant fills the Runs' pool and queues four more; the quiet
/// tenant's validation answers at once (validations have a pool of their
/// own), and its Run takes the first freed place, before the busy
/// tenant's queued Runs (served in arrival order it would have come after
/// all four: the slow service would have seen six calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_tenant_gets_the_next_place_and_never_waits_behind_a_neighbours_runs() {
    let mut configured = settings(Backend::Sqlite).await;
    configured.admin_token = Some(ADMIN_TOKEN.to_owned());
    configured.capacity.run_instances = 2;
    configured.capacity.nested_percent = 0;
    configured.capacity.run_wait_ms = 8_000;
    configured.request_timeout_ms = 20_000;
    let data_dir = configured.data_dir.clone();
    let server = server(configured).await;
    let (slow_url, slow_calls) = slow_service(Duration::from_millis(1_500)).await;
    let (fast_url, slow_seen) = fast_service(slow_calls.clone()).await;
    let mut fast = slow_entry(&fast_url);
    fast["id"] = json!("cap_fast_effect");
    for tenant in ["busy", "quiet"] {
        let (status, body) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": tenant}))).await;
        assert_eq!(status, 201, "{body}");
        crate::tenancy::upload_language(&server, tenant, pilotage_bundled::WORKFLOW).await;
        for entry in [slow_entry(&slow_url), fast.clone()] {
            let path = format!("/tenants/{tenant}/catalog/entries/{}", entry["id"].as_str().unwrap());
            let (status, body) = admin(&server, reqwest::Method::PUT, &path, Some(entry)).await;
            assert!(status < 300, "{status} {body}");
        }
    }
    let dev = pilotage_server::auth::dev::DevTokens::load(&data_dir, format!("http://{}/mcp", server.addr)).unwrap();
    let token = |tenant: &str| dev.mint(tenant, "agent", &["pilotage:mcp".to_owned()], 600).unwrap();
    let busy = Arc::new(client_as(&server.mcp_url(), Some(&token("busy"))).await);
    let quiet = client_as(&server.mcp_url(), Some(&token("quiet"))).await;

    let burst: Vec<_> = (1..=6)
        .map(|n| {
            let busy = busy.clone();
            tokio::spawn(async move { ok(&busy, "run_workflow", one_call("cap_slow_effect", n)).await })
        })
        .collect();
    until_held(&slow_calls, 2).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = readyz(&server.addr).await;
        if body.contains("execution: 2 of 2 calls, 4 waiting") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the busy tenant's Runs did not queue: {body}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // A fresh program: the validation cache cannot answer it.
    let program =
        json!({"steps": [{"id": "quiet-check", "kind": "call", "capability": "cap_fast_effect", "with": {"n": 7}}]});
    let validated = ok(&quiet, "validate_workflow", json!({"workflow": program})).await;
    assert_eq!(validated["valid"], true, "{validated}");
    assert_eq!(slow_calls.load(Ordering::SeqCst), 2, "the validation did not wait for a Run to end");

    let ran = ok(&quiet, "run_workflow", one_call("cap_fast_effect", 1)).await;
    assert_eq!(ran["outcome"]["status"], "success", "{ran}");
    // When the quiet Run invoked, at most the busy tenant's third Run had
    // started (it took the second place freed at the same moment).
    let seen = slow_seen.load(Ordering::SeqCst);
    assert!(
        (2..=3).contains(&seen),
        "the quiet tenant's Run waited behind the busy tenant's queue: the slow service had seen {seen} calls"
    );

    for run in burst {
        let done = run.await.unwrap();
        assert_eq!(done["outcome"]["status"], "success", "every queued Run ran in the end: {done}");
    }
    assert_eq!(slow_calls.load(Ordering::SeqCst), 6);
    server.stop().await;
}

/// Four guests spin in `validate` on a two-worker runtime (the server is
/// in this process, on the test's runtime): each yields at every epoch
/// tick, so the manifest and another tenant's validation are answered
/// while all four still spin; then the wall-time deadline stops each of
/// them (`bounds_exceeded`), and a spinning Run is stopped too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_guests_do_not_starve_the_runtime_and_their_deadline_stops_them() {
    let mut configured = settings(Backend::Sqlite).await;
    configured.bounds.validation = pilotage_engine::CallBounds { fuel: u64::MAX / 4, wall_time_ms: 1_500 };
    configured.capacity.validation_instances = 8;
    let server = server(configured).await;
    let hostile = server.platform.engine().load(crate::support::HOSTILE).unwrap();
    let tenant = server.platform.install_language("demo", hostile).await;
    // The entry the hostile Language's programs plan to call.
    tenant.put_entries(vec![pilotage_engine::catalog::StoredEntry::new(
        serde_json::from_value(json!({"id": "cap_a", "kind": "capability", "name": "A",
            "input_schema": {"type": "object"}, "risk": "safe",
            "risk_hints": {"readOnly": true, "destructive": false, "openWorld": false}}))
        .unwrap(),
        vec![],
        None,
    )]);
    let client = Arc::new(client(&server.mcp_url()).await);

    let ended = Arc::new(AtomicU32::new(0));
    let spins: Vec<_> = (0..4)
        .map(|_| {
            let (client, ended) = (client.clone(), ended.clone());
            tokio::spawn(async move {
                let error = request_error(&client, "validate_hostile", json!({"program": "validate:spin"})).await;
                ended.fetch_add(1, Ordering::SeqCst);
                error
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let manifest = ok(&client, "pilotage_manifest", json!({})).await;
    assert!(manifest.get("languages").is_some() || manifest.get("manifest").is_some(), "{manifest}");
    let validated = ok(&client, "validate_workflow", json!({"workflow": crate::endpoint::spec_program()})).await;
    assert_eq!(validated["valid"], true);
    assert_eq!(ended.load(Ordering::SeqCst), 0, "the answers came while every guest still spun");

    for spin in spins {
        let error = spin.await.unwrap();
        assert_eq!(error["error"]["kind"], "bounds_exceeded", "{error}");
        assert!(error["error"]["message"].as_str().unwrap().contains("wall-time bound of 1500 ms"), "{error}");
    }
    // A Run that spins ends at its bound too, as an outcome.
    let run = ok(&client, "run_hostile", json!({"program": "execute:spin"})).await;
    assert!(["timeout", "resource_exhausted"].contains(&run["outcome"]["status"].as_str().unwrap()), "{run}");
    assert_eq!(run["outcome"]["ok"], false);
    server.stop().await;
}
