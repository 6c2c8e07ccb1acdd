//! The main job (`pilotage demo`) runs in the test suite too: the same
//! scenarios, the same checks, on both backends.

use crate::endpoint::{Backend, settings};

async fn demo_passes(backend: Backend) {
    let mut output = Vec::new();
    let report = pilotage_platform::demo::run(settings(backend).await, &mut output).await.expect("the demo runs");
    let text = String::from_utf8_lossy(&output);
    assert!(report.succeeded(), "the demo failed:\n{text}");
    assert!(report.passed.len() >= 14, "only {} checks ran:\n{text}", report.passed.len());
    for words in ["close match: cap_read_user_profile", "catalog_drift", "took 'then'", "claims made by the server"] {
        assert!(text.contains(words), "the story never says '{words}':\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_passes_on_sqlite() {
    demo_passes(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_passes_on_postgres() {
    demo_passes(Backend::Postgres).await;
}
