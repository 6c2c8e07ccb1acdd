//! The operator's command line against a real server: a tenant's quotas
//! and egress shown and changed, refusals in one plain sentence (never a
//! JSON dump, a byte array or a Rust type name), an unknown tenant named
//! instead of an empty list, a development token minted only from a
//! server's own data folder, and tables for a person. Each good case has
//! its refused twin beside it (Part IV §4.2).

use serde_json::{Value, json};

use crate::endpoint::{Backend, server, settings, unique};
use crate::tenancy::{ADMIN_TOKEN, admin};

/// What one `pilotage` command did.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn json(&self) -> Value {
        assert!(self.ok, "{}{}", self.stdout, self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stdout))
    }

    /// Asserts a refusal told in one plain `error:` line holding `words`,
    /// with nothing else on stderr but an upload's progress line.
    fn refused_with(&self, words: &str) {
        assert!(!self.ok, "not refused: {}", self.stdout);
        let lines: Vec<&str> = self.stderr.lines().filter(|line| !line.trim().is_empty()).collect();
        let errors: Vec<&&str> = lines.iter().filter(|line| line.starts_with("error: ")).collect();
        assert_eq!(errors.len(), 1, "one error line expected: {}", self.stderr);
        assert!(errors[0].contains(words), "{}", errors[0]);
        assert!(
            lines.iter().all(|line| line.starts_with("error: ") || line.starts_with("uploading ")),
            "{}",
            self.stderr
        );
        for noise in ["{\"", "[0x", "Transport [", "\u{1b}[", "rmcp::"] {
            assert!(!self.stderr.contains(noise), "{noise:?} in {}", self.stderr);
        }
    }
}

async fn pilotage(args: &[&str]) -> Ran {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(args)
        .env("PILOTAGE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env_remove("PILOTAGE_DATA_DIR")
        .env_remove("PILOTAGE_TOKEN")
        .env_remove("PILOTAGE_LOG")
        .output()
        .await
        .unwrap();
    Ran {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_changes_quotas_and_egress_and_reads_every_refusal_as_one_sentence() {
    let mut settings = settings(Backend::Sqlite).await;
    settings.admin_token = Some(ADMIN_TOKEN.into());
    let data_dir = settings.data_dir.clone();
    let server = server(settings).await;
    let base = format!("http://{}", server.addr);
    let (status, _) = admin(&server, reqwest::Method::POST, "/tenants", Some(json!({"id": "acme"}))).await;
    assert_eq!(status, 201);
    let shown = |member: &'static str| {
        let server = &server;
        async move { admin(server, reqwest::Method::GET, "/tenants/acme", None).await.1[member].clone() }
    };

    // Quotas: `set` changes the ones named and keeps the others.
    let before = shown("quotas").await;
    let set = pilotage(&[
        "tenant",
        "quotas",
        "set",
        "acme",
        "--max-concurrent-runs",
        "3",
        "--requests-per-second",
        "50",
        "--server",
        &base,
    ])
    .await
    .json();
    assert_eq!((set["max_concurrent_runs"].clone(), set["requests_per_second"].clone()), (json!(3), json!(50)));
    assert_eq!(set["max_deployments"], before["max_deployments"]);
    assert_eq!(shown("quotas").await, set);
    assert_eq!(pilotage(&["tenant", "quotas", "get", "acme", "--server", &base]).await.json(), set);
    // ... and an out-of-range one is refused, naming it, changing nothing.
    pilotage(&["tenant", "quotas", "set", "acme", "--task-wall-time-ms", "0", "--server", &base])
        .await
        .refused_with("quotas.task_wall_time_ms must be from 1");
    pilotage(&["tenant", "quotas", "set", "acme", "--server", &base]).await.refused_with("name at least one quota");
    assert_eq!(shown("quotas").await, set);

    // Egress: `set` replaces the policy whole.
    let egress = pilotage(&[
        "tenant",
        "egress",
        "set",
        "acme",
        "--allow",
        "10.1.0.0/16",
        "--allow",
        "broker.example.com",
        "--mqtt-topic-prefix",
        "acme",
        "--server",
        &base,
    ])
    .await
    .json();
    assert_eq!(egress, json!({"allow": ["10.1.0.0/16", "broker.example.com"], "mqtt_topic_prefix": "acme"}));
    assert_eq!(shown("egress").await, egress);
    pilotage(&["tenant", "egress", "set", "acme", "--allow", "not a host!", "--server", &base])
        .await
        .refused_with("egress.allow[0]: 'not a host!' is neither a CIDR nor a host name");
    pilotage(&["tenant", "egress", "set", "acme", "--server", &base]).await.refused_with("--public-only");
    assert_eq!(shown("egress").await, egress);
    assert_eq!(
        pilotage(&["tenant", "egress", "set", "acme", "--public-only", "--server", &base]).await.json(),
        json!({})
    );
    assert_eq!(pilotage(&["tenant", "egress", "get", "acme", "--server", &base]).await.json(), json!({}));
    // Each change is audited with what it set.
    let (_, audit) = admin(&server, reqwest::Method::GET, "/audit", None).await;
    let updates: Vec<&Value> =
        audit["audit"].as_array().unwrap().iter().filter(|row| row["action"] == "tenant.update").collect();
    assert_eq!(updates.len(), 3, "{audit}");
    assert!(updates.iter().any(|row| row["detail"].as_str().unwrap().contains("\"max_concurrent_runs\":3")));

    // What an unknown tenant owns is not an empty list: the tenant is named.
    pilotage(&["approval", "ls", "nosuch", "--server", &base]).await.refused_with("no tenant 'nosuch' (404 Not Found)");
    for path in ["/tenants/nosuch/runs", "/tenants/nosuch/approvals", "/tenants/nosuch/secrets"] {
        let (status, body) = admin(&server, reqwest::Method::GET, path, None).await;
        assert_eq!((status, body["error"]["message"].as_str()), (404, Some("no tenant 'nosuch'")), "{path}");
    }
    let (status, _) = admin(&server, reqwest::Method::GET, "/tenants/acme/approvals", None).await;
    assert_eq!(status, 200);

    // The wrong file uploaded as a Language: said in words.
    let text_file = data_dir.join("notes.txt");
    std::fs::write(&text_file, "hello, this is not a component").unwrap();
    pilotage(&["tenant", "publish", "acme", text_file.to_str().unwrap(), "--server", &base])
        .await
        .refused_with("the file is not WebAssembly");

    // A table for a person who asks for one (and by default at a terminal).
    let table = pilotage(&["tenant", "list", "--output", "table", "--server", &base]).await;
    assert!(table.ok, "{}", table.stderr);
    let mut lines = table.stdout.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("ID ") && header.contains("QUOTAS"), "{header}");
    assert!(lines.any(|line| line.starts_with("acme ")), "{}", table.stdout);
    let one = pilotage(&["tenant", "quotas", "get", "acme", "--output", "table", "--server", &base]).await;
    assert!(one.stdout.lines().any(|line| line.split_whitespace().eq(["max_concurrent_runs", "3"])), "{}", one.stdout);

    // A development token comes only from a server's own data folder: an
    // empty one is refused (and left without a secret), the server's
    // gives a token the server accepts.
    let elsewhere = std::env::temp_dir().join(unique("pilotage-not-a-server"));
    let refused = pilotage(&["token", "mint", "--data-dir", elsewhere.to_str().unwrap(), "--public-url", &base]).await;
    refused.refused_with("no development secret here");
    assert!(refused.stderr.contains("--data-dir"), "{}", refused.stderr);
    assert!(!elsewhere.join("dev-secret").exists());
    let minted = pilotage(&["token", "mint", "--data-dir", data_dir.to_str().unwrap(), "--public-url", &base]).await;
    assert!(minted.ok, "{}", minted.stderr);
    let tools = pilotage(&["client", "tools", &server.mcp_url(), "--token", minted.stdout.trim()]).await;
    assert!(tools.ok, "{}{}", tools.stdout, tools.stderr);
    // ... and a token it does not accept gets a sentence, not rmcp's types.
    pilotage(&["client", "tools", &server.mcp_url(), "--token", "not-a-token"])
        .await
        .refused_with("refused the request (401)");
    server.stop().await;
}
