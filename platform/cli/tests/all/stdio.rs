//! The stdio transport (`pilotage serve --stdio`, Part III §8.1): the real
//! binary as a child process, the whole loop over its stdin and stdout, and
//! a clean exit when the client goes away.

use pilotage_client::{Connection, Reply};
use serde_json::{Value, json};

fn result(reply: Reply) -> Value {
    match reply {
        Reply::Result(value) => value,
        Reply::RequestError(error) => panic!("a request error: {error:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_loop_runs_over_stdio() {
    let dir = std::env::temp_dir().join(crate::endpoint::unique("stdio"));
    let args: Vec<String> =
        ["serve", "--stdio", "--demo", "--data-dir", &dir.display().to_string()].map(str::to_owned).to_vec();
    let connection = Connection::stdio(env!("CARGO_BIN_EXE_pilotage"), &args).await.expect("the stdio server starts");
    assert!(connection.declares_extension());
    assert!(connection.inline_manifest().is_some(), "the initialize result carries the manifest");
    let tools = connection.tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "run_workflow"));

    // Invalid, then corrected, then run with store:true, then the trace.
    let invalid = result(connection.call("validate_workflow", json!({"workflow": {"steps": [{"id": "profile", "kind": "call", "capability": "cap_read_user_profil"}]}})).await.unwrap());
    assert_eq!(invalid["valid"], false);
    assert!(invalid.to_string().contains("cap_read_user_profile"), "the hint names the right entry: {invalid}");
    let run = result(
        connection
            .call(
                "run_workflow",
                json!({"workflow": crate::endpoint::spec_program(), "input": {"userId": "42"}, "store": true}),
            )
            .await
            .unwrap(),
    );
    assert_eq!(run["outcome"]["status"], "success", "{run}");
    let trace = result(connection.call("trace_workflow", json!({"run_id": run["run_id"]})).await.unwrap());
    assert_eq!(trace["run_id"], run["run_id"]);

    // A structural fault is a JSON-RPC error on this transport too.
    let unknown = connection.call("no_such_tool", json!({})).await;
    assert!(matches!(unknown, Err(pilotage_client::ClientError::Carrier { code: -32602, .. })), "{unknown:?}");
    connection.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_that_cannot_start_says_why() {
    let missing = Connection::stdio("/nonexistent/pilotage", &[]).await;
    assert!(matches!(missing, Err(pilotage_client::ClientError::Transport(_))), "{missing:?}");
    // A server refusing its settings exits before the handshake: a transport
    // error, not a hang.
    let args: Vec<String> = ["serve", "--stdio", "--database-url", "nosuch://x"].map(str::to_owned).to_vec();
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        Connection::stdio(env!("CARGO_BIN_EXE_pilotage"), &args),
    )
    .await
    .expect("no hang");
    assert!(refused.is_err());
}
