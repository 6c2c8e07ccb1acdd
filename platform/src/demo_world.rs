//! The demo capability service: a small, real HTTP service (user profiles,
//! orders, an outbox) that the demo tenant's catalog entries are bound to,
//! so the demo's workflows call real endpoints over loopback.
//!
//! Every capability is `POST <path>` with a JSON body and answers JSON:
//! `/users/profile`, `/orders/list`, `/orders/flag`, `/orders/cancel`,
//! `/outbox/send`, `/outbox/list`, `/wait` (sleeps), `/hr/payroll`. `GET /stats` counts calls per path (the
//! tests use it to prove an idempotent execute ran once), `POST /reset`
//! restores the initial data. Unknown users and orders answer 404.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Json, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// The service's data.
#[derive(Debug)]
struct World {
    users: BTreeMap<String, Value>,
    orders: BTreeMap<String, Vec<Value>>,
    outbox: Vec<Value>,
    calls: BTreeMap<String, u64>,
}

impl World {
    fn initial() -> World {
        let users = [
            ("42", "Amira Hassan", "amira.hassan@example.com", "gold"),
            ("7", "Jonas Weber", "jonas.weber@example.com", "silver"),
            ("13", "Mei Chen", "mei.chen@example.com", "bronze"),
        ]
        .into_iter()
        .map(|(id, name, email, tier)| (id.to_owned(), json!({"id": id, "name": name, "email": email, "tier": tier})))
        .collect();
        let order = |id: &str, total: f64, status: &str| json!({"id": id, "total": total, "status": status});
        let orders = BTreeMap::from([
            (
                "42".to_owned(),
                vec![
                    order("o-1003", 410.0, "pending"),
                    order("o-1002", 35.0, "shipped"),
                    order("o-1001", 120.5, "pending"),
                ],
            ),
            ("7".to_owned(), vec![]),
            ("13".to_owned(), vec![order("o-1301", 18.9, "cancelled")]),
        ]);
        World { users, orders, outbox: Vec::new(), calls: BTreeMap::new() }
    }

    fn order_mut(&mut self, order_id: &str) -> Option<&mut Value> {
        self.orders.values_mut().flat_map(|orders| orders.iter_mut()).find(|order| order["id"] == order_id)
    }
}

/// Shared state of the service.
#[derive(Clone, Debug)]
pub struct DemoWorld {
    world: Arc<Mutex<World>>,
}

impl Default for DemoWorld {
    fn default() -> Self {
        DemoWorld { world: Arc::new(Mutex::new(World::initial())) }
    }
}

impl DemoWorld {
    /// Calls received per path so far.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.lock().calls.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn count(&self, path: &str) -> std::sync::MutexGuard<'_, World> {
        let mut world = self.lock();
        *world.calls.entry(path.to_owned()).or_default() += 1;
        world
    }
}

fn missing(what: &str, id: &Value) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"error": format!("no such {what}: {id}")}))).into_response()
}

fn bad_request(message: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response()
}

fn string_field<'v>(body: &'v Value, name: &str) -> Option<&'v str> {
    body.get(name).and_then(Value::as_str)
}

async fn users_profile(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    let world = demo.count("/users/profile");
    let Some(user_id) = string_field(&body, "user_id") else { return bad_request("user_id (a string) is required") };
    match world.users.get(user_id) {
        Some(user) => Json(user.clone()).into_response(),
        None => missing("user", &body["user_id"]),
    }
}

async fn orders_list(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    let world = demo.count("/orders/list");
    let Some(user_id) = string_field(&body, "user_id") else { return bad_request("user_id (a string) is required") };
    match world.orders.get(user_id) {
        Some(orders) => Json(json!({"orders": orders})).into_response(),
        None => missing("user", &body["user_id"]),
    }
}

async fn orders_flag(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    let mut world = demo.count("/orders/flag");
    let (Some(order_id), Some(reason)) = (string_field(&body, "order_id"), string_field(&body, "reason")) else {
        return bad_request("order_id and reason (strings) are required");
    };
    match world.order_mut(order_id) {
        Some(order) => {
            order["flag"] = json!(reason);
            Json(json!({"order_id": order_id, "flagged": true})).into_response()
        }
        None => missing("order", &body["order_id"]),
    }
}

async fn orders_cancel(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    let mut world = demo.count("/orders/cancel");
    let Some(order_id) = string_field(&body, "order_id") else { return bad_request("order_id (a string) is required") };
    match world.order_mut(order_id) {
        Some(order) => {
            order["status"] = json!("cancelled");
            Json(json!({"order_id": order_id, "status": "cancelled"})).into_response()
        }
        None => missing("order", &body["order_id"]),
    }
}

async fn outbox_send(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    let mut world = demo.count("/outbox/send");
    let (Some(to), Some(subject), Some(text)) =
        (string_field(&body, "to"), string_field(&body, "subject"), string_field(&body, "body"))
    else {
        return bad_request("to, subject and body (strings) are required");
    };
    let message_id = format!("msg-{}", world.outbox.len() + 1);
    let message = json!({"message_id": message_id, "to": to, "subject": subject, "body": text});
    world.outbox.push(message);
    Json(json!({"message_id": message_id, "queued": true})).into_response()
}

async fn outbox_list(State(demo): State<DemoWorld>) -> Response {
    let world = demo.count("/outbox/list");
    let messages: Vec<Value> = world
        .outbox
        .iter()
        .map(|m| json!({"message_id": m["message_id"], "to": m["to"], "subject": m["subject"]}))
        .collect();
    Json(json!({"messages": messages})).into_response()
}

async fn wait(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    drop(demo.count("/wait"));
    let Some(ms) = body.get("ms").and_then(Value::as_u64).filter(|ms| *ms <= 10_000) else {
        return bad_request("ms (an integer from 0 to 10000) is required");
    };
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    Json(json!({"waited_ms": ms})).into_response()
}

async fn hr_payroll(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    drop(demo.count("/hr/payroll"));
    let Some(employee) = string_field(&body, "employee_id") else {
        return bad_request("employee_id (a string) is required");
    };
    Json(json!({"employee_id": employee, "salary": 5400.0})).into_response()
}

async fn stats(State(demo): State<DemoWorld>) -> Response {
    Json(json!({"calls": demo.calls()})).into_response()
}

async fn reset(State(demo): State<DemoWorld>) -> Response {
    *demo.lock() = World::initial();
    StatusCode::NO_CONTENT.into_response()
}

/// The service's routes.
pub fn router(demo: DemoWorld) -> Router {
    Router::new()
        .route("/users/profile", post(users_profile))
        .route("/orders/list", post(orders_list))
        .route("/orders/flag", post(orders_flag))
        .route("/orders/cancel", post(orders_cancel))
        .route("/outbox/send", post(outbox_send))
        .route("/outbox/list", post(outbox_list))
        .route("/wait", post(wait))
        .route("/hr/payroll", post(hr_payroll))
        .route("/stats", get(stats))
        .route("/reset", post(reset))
        .with_state(demo)
}

/// Serves the demo service on `listener` until `shutdown` completes.
///
/// # Errors
/// When the listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    demo: DemoWorld,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::http::connections::serve(
        listener,
        router(demo),
        crate::http::connections::ConnectionLimits::default(),
        shutdown,
    )
    .await
}
