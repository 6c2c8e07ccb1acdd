//! The demo capability service: a small, real HTTP service (user profiles,
//! orders, an outbox, and a home) that the demo tenant's catalog entries
//! are bound to, so the demo's programs call real endpoints over loopback.
//!
//! Every capability is `POST <path>` with a JSON body and answers JSON:
//! `/users/profile`, `/orders/list`, `/orders/flag`, `/orders/cancel`,
//! `/outbox/send`, `/outbox/list`, `/wait` (sleeps), `/hr/payroll`. `GET /stats` counts calls per path (the
//! tests use it to prove an idempotent execute ran once), `POST /reset`
//! restores the initial data. Unknown users and orders answer 404.
//!
//! The home (automation/1's device registry, `demo/home.json`): a front
//! door with a sensor and a lock, a porch light, a garage door.
//! `/home/front_door/state` and `/home/porch_light/state` read,
//! `/home/porch_light/turn_on` (`brightness` 1 to 100, else 400) and
//! `/turn_off` switch the light, `/home/front_door/unlock` unlocks the door,
//! `/home/garage_door/open` opens the garage. `POST /home/front_door/open`
//! is a person opening the door, not a capability: the home hub reports it
//! to the platform as a signed webhook delivery (source `home`, see
//! [`DemoWorld::connect_hub`]) and answers what the platform said.
//! `GET /home` is the whole home's state.

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
    home: Home,
    calls: BTreeMap<String, u64>,
}

/// The home's devices.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Home {
    door_open: bool,
    door_locked: bool,
    light_on: bool,
    brightness: u64,
    garage_open: bool,
}

impl Home {
    fn initial() -> Home {
        Home { door_open: false, door_locked: true, light_on: false, brightness: 0, garage_open: false }
    }

    fn door(&self) -> Value {
        json!({"state": if self.door_open { "open" } else { "closed" }, "locked": self.door_locked})
    }

    fn light(&self) -> Value {
        json!({"on": self.light_on, "brightness": self.brightness})
    }

    fn snapshot(&self) -> Value {
        json!({
            "front_door": self.door(),
            "porch_light": self.light(),
            "garage_door": {"state": if self.garage_open { "open" } else { "closed" }},
        })
    }
}

/// Where the home hub reports the home's events: the platform's event
/// endpoint for one tenant and source, and the source's signing key.
#[derive(Clone, Debug)]
struct Hub {
    events_url: String,
    key: String,
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
        World { users, orders, outbox: Vec::new(), home: Home::initial(), calls: BTreeMap::new() }
    }

    fn order_mut(&mut self, order_id: &str) -> Option<&mut Value> {
        self.orders.values_mut().flat_map(|orders| orders.iter_mut()).find(|order| order["id"] == order_id)
    }
}

/// Shared state of the service.
#[derive(Clone, Debug)]
pub struct DemoWorld {
    world: Arc<Mutex<World>>,
    hub: Arc<Mutex<Option<Hub>>>,
}

impl Default for DemoWorld {
    fn default() -> Self {
        DemoWorld { world: Arc::new(Mutex::new(World::initial())), hub: Arc::new(Mutex::new(None)) }
    }
}

impl DemoWorld {
    /// Calls received per path so far.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.lock().calls.clone()
    }

    /// The home's state: `{front_door: {state, locked}, porch_light: {on,
    /// brightness}, garage_door: {state}}`.
    pub fn home(&self) -> Value {
        self.lock().home.snapshot()
    }

    /// Makes the home hub report the home's events to `events_url` (the
    /// platform's `/events/{tenant}/{source}`), signed with `key` (the
    /// tenant secret `webhook:<source>`). Until then, a door that opens
    /// reports nothing.
    pub fn connect_hub(&self, events_url: String, key: String) {
        *self.hub.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Hub { events_url, key });
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

async fn front_door_state(State(demo): State<DemoWorld>) -> Response {
    Json(demo.count("/home/front_door/state").home.door()).into_response()
}

async fn porch_light_state(State(demo): State<DemoWorld>) -> Response {
    Json(demo.count("/home/porch_light/state").home.light()).into_response()
}

async fn porch_light_turn_on(State(demo): State<DemoWorld>, Json(body): Json<Value>) -> Response {
    let mut world = demo.count("/home/porch_light/turn_on");
    let brightness = match body.get("brightness") {
        None => 100,
        Some(value) => match value.as_u64().filter(|b| (1..=100).contains(b)) {
            Some(brightness) => brightness,
            None => return bad_request("brightness is an integer from 1 to 100"),
        },
    };
    world.home.light_on = true;
    world.home.brightness = brightness;
    Json(world.home.light()).into_response()
}

async fn porch_light_turn_off(State(demo): State<DemoWorld>) -> Response {
    let mut world = demo.count("/home/porch_light/turn_off");
    world.home.light_on = false;
    world.home.brightness = 0;
    Json(world.home.light()).into_response()
}

async fn front_door_unlock(State(demo): State<DemoWorld>) -> Response {
    let mut world = demo.count("/home/front_door/unlock");
    world.home.door_locked = false;
    Json(world.home.door()).into_response()
}

async fn garage_door_open(State(demo): State<DemoWorld>) -> Response {
    let mut world = demo.count("/home/garage_door/open");
    world.home.garage_open = true;
    Json(json!({"state": "open"})).into_response()
}

/// Someone opens the front door: the hub reports `{"device":
/// "front_door", "state": "open"}` to the platform as a signed delivery
/// and answers the platform's status and body.
async fn front_door_open(State(demo): State<DemoWorld>) -> Response {
    let door = {
        let mut world = demo.count("/home/front_door/open");
        world.home.door_open = true;
        world.home.door()
    };
    let hub = demo.hub.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
    let Some(hub) = hub else {
        return Json(json!({"front_door": door, "reported": false})).into_response();
    };
    let event = json!({"device": "front_door", "state": "open"}).to_string();
    let sent = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    let signature = crate::deploy::webhook::sign(hub.key.as_bytes(), sent, event.as_bytes());
    let delivered = reqwest::Client::new()
        .post(&hub.events_url)
        .header("content-type", "application/json")
        .header(crate::deploy::webhook::TIMESTAMP_HEADER, sent.to_string())
        .header(crate::deploy::webhook::SIGNATURE_HEADER, signature)
        .body(event)
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await;
    match delivered {
        Ok(response) => {
            let status = response.status().as_u16();
            let answer: Value = response.json().await.unwrap_or(Value::Null);
            Json(json!({"front_door": door, "reported": true, "status": status, "answer": answer})).into_response()
        }
        Err(error) => (
            StatusCode::BAD_GATEWAY,
            Json(json!({"front_door": door, "reported": false, "error": format!("the hub could not reach the platform: {error}")})),
        )
            .into_response(),
    }
}

async fn front_door_close(State(demo): State<DemoWorld>) -> Response {
    let mut world = demo.count("/home/front_door/close");
    world.home.door_open = false;
    Json(world.home.door()).into_response()
}

async fn home(State(demo): State<DemoWorld>) -> Response {
    Json(demo.home()).into_response()
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
        .route("/home", get(home))
        .route("/home/front_door/state", post(front_door_state))
        .route("/home/front_door/unlock", post(front_door_unlock))
        .route("/home/front_door/open", post(front_door_open))
        .route("/home/front_door/close", post(front_door_close))
        .route("/home/porch_light/state", post(porch_light_state))
        .route("/home/porch_light/turn_on", post(porch_light_turn_on))
        .route("/home/porch_light/turn_off", post(porch_light_turn_off))
        .route("/home/garage_door/open", post(garage_door_open))
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
