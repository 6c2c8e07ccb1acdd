//! A fleet for the load benchmark (`PILOTAGE_LOAD_REPLICAS`): release
//! `pilotage serve` processes on one fresh PostgreSQL schema behind haproxy
//! (round robin per request, as `tests/all/fleet.rs` runs it), and the
//! propagation delay of a catalog edit from one replica to another.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

/// The operator token of the fleet's admin API.
const ADMIN_TOKEN: &str = "bench-fleet-operator";

/// Replicas behind a balancer; everything is killed on drop.
pub struct Fleet {
    replicas: Vec<(tokio::process::Child, SocketAddr)>,
    balancer: std::process::Child,
    /// The balancer's MCP URL.
    pub url: String,
    folder: PathBuf,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.balancer.kill();
        let _ = self.balancer.wait();
        for (child, _) in &mut self.replicas {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.folder);
    }
}

/// A fresh schema in the PostgreSQL of `PILOTAGE_TEST_POSTGRES` (default the
/// machine's, as the tests use) and a URL whose connections use it.
async fn fresh_schema() -> String {
    use sqlx::Connection;
    let server = std::env::var("PILOTAGE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("pilotage_bench_fleet_{}_{}", std::process::id(), rand_suffix());
    let mut connection =
        sqlx::PgConnection::connect(&server).await.expect("PostgreSQL at 127.0.0.1:5432 (see .ci/run)");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}"))).execute(&mut connection).await.unwrap();
    let separator = if server.contains('?') { '&' } else { '?' };
    format!("{server}{separator}options=-c%20search_path%3D{schema}")
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64 % 1_000_000)
}

/// Starts one replica and waits for the line naming its MCP URL.
async fn replica(data_dir: &std::path::Path, database_url: &str) -> (tokio::process::Child, SocketAddr) {
    let mut child = tokio::process::Command::new(pilotage_test_support::pilotage_binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--demo-postgres", "off", "--admin-token", ADMIN_TOKEN])
        .args(["--database-url", database_url])
        .arg("--data-dir")
        .arg(data_dir)
        .env("PILOTAGE_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the release pilotage binary starts");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
            .await
            .expect("the replica starts within 2 minutes")
            .expect("its stderr is readable")
            .expect("it says where it listens");
        if let Some(url) = line.strip_prefix("Pilotage Platform: MCP at ") {
            break url.to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp").parse().expect("an address");
    (child, addr)
}

impl Fleet {
    /// `count` replicas on a fresh schema behind haproxy, with the demo
    /// tenant's request quota raised (through the first replica, so the
    /// change travels to the others as any admin change does).
    pub async fn start(count: usize) -> Fleet {
        pilotage_client::install_crypto_provider();
        let folder = std::env::temp_dir().join(format!("pilotage-bench-fleet-{}-{count}", std::process::id()));
        let _ = std::fs::remove_dir_all(&folder);
        std::fs::create_dir_all(&folder).expect("a scratch folder");
        let database_url = fresh_schema().await;
        let data_dir = folder.join("data");
        let mut replicas = Vec::new();
        for _ in 0..count {
            // One after the other: the first creates the shared secrets.
            replicas.push(replica(&data_dir, &database_url).await);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let servers: String = replicas
            .iter()
            .enumerate()
            .map(|(index, (_, addr))| format!("    server r{index} {addr} check inter 500ms\n"))
            .collect();
        let config = format!(
            "global\n    maxconn 4096\n    nbthread 1\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 60s\n    timeout server 60s\n\
             frontend mcp\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\
             backend replicas\n    balance roundrobin\n    option httpchk GET /readyz\n{servers}"
        );
        std::fs::write(folder.join("haproxy.cfg"), config).unwrap();
        let balancer = std::process::Command::new("haproxy")
            .arg("-f")
            .arg(folder.join("haproxy.cfg"))
            .arg("-db")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("haproxy (Debian package; .ci/run installs it)");
        let fleet = Fleet { replicas, balancer, url: format!("http://127.0.0.1:{port}/mcp"), folder };
        let status = fleet
            .admin(
                0,
                reqwest::Method::PATCH,
                "/tenants/demo",
                Some(json!({"quotas": {
            "requests_per_second": 1_000_000, "max_concurrent_runs": 1024}})),
            )
            .await;
        assert_eq!(status.0, 200, "{}", status.1);
        // Ready when the balancer passes requests and every replica holds
        // the raised quota.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let healthy =
                reqwest::get(format!("http://127.0.0.1:{port}/healthz")).await.is_ok_and(|r| r.status() == 200);
            let mut quotas = true;
            for index in 0..count {
                let (_, body) = fleet.admin(index, reqwest::Method::GET, "/tenants/demo", None).await;
                quotas &= body.contains("1000000");
            }
            if healthy && quotas {
                break;
            }
            assert!(Instant::now() < deadline, "the fleet did not come up");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Every replica behind the balancer passes its health check.
        tokio::time::sleep(Duration::from_secs(1)).await;
        fleet
    }

    /// An admin request to replica `index`: status and body.
    async fn admin(&self, index: usize, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, String) {
        let base = format!("http://{}/admin/v1", self.replicas[index].1);
        let mut request = reqwest::Client::new().request(method, format!("{base}{path}")).bearer_auth(ADMIN_TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the replica answers");
        (response.status().as_u16(), response.text().await.unwrap_or_default())
    }

    /// Edits one catalog entry `edits` times through replica 0 and, after
    /// each answer, polls replica 1 until it serves the edit: the delays,
    /// sorted.
    pub async fn propagation(&self, edits: usize) -> Vec<Duration> {
        let path = "/tenants/demo/catalog/entries/cap_read_outbox";
        let (_, text) = self.admin(0, reqwest::Method::GET, path, None).await;
        let mut entry: Value = serde_json::from_str(&text).expect("the entry");
        let mut delays = Vec::with_capacity(edits);
        for n in 0..edits {
            let description = format!("Reads the outbox (edit {n}).");
            entry["description"] = json!(description);
            let (status, body) = self.admin(0, reqwest::Method::PUT, path, Some(entry.clone())).await;
            assert!(status == 200 || status == 201, "{status} {body}");
            let answered = Instant::now();
            loop {
                let (_, seen) = self.admin(1, reqwest::Method::GET, path, None).await;
                if seen.contains(&description) {
                    delays.push(answered.elapsed());
                    break;
                }
                assert!(answered.elapsed() < Duration::from_secs(10), "edit {n} did not reach replica 1");
            }
        }
        delays.sort();
        delays
    }
}
