//! Every setting `pilotage serve --help` lists can be reached, by its flag
//! and by its environment variable (docs/architecture.md, "Configuration"),
//! and help never prints what a variable holds.
//!
//! The list comes from the help text itself, so a setting added later is
//! checked too: a flag this file has no valid value for fails the test,
//! naming it.

use std::path::Path;
use std::process::Command;

/// One option of `pilotage serve --help`: its long flag (without `--`) and
/// its environment variable, if it has one.
#[derive(Debug)]
struct Listed {
    flag: String,
    env: Option<String>,
}

/// The options `pilotage serve --help` lists, in its order. Each option's
/// block starts at a line whose first word is `--flag` (or `-x, --flag`)
/// and runs to the next such line; its variable is the `[env: NAME]` in
/// the block.
fn listed() -> Vec<Listed> {
    let help = Command::new(env!("CARGO_BIN_EXE_pilotage")).args(["serve", "--help"]).output().unwrap();
    assert!(help.status.success(), "{help:?}");
    let text = String::from_utf8(help.stdout).unwrap();
    let mut options: Vec<Listed> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let long = trimmed.strip_prefix("--").or_else(|| {
            let short = trimmed.strip_prefix('-')?;
            short.split_once(", --").map(|(_, long)| long)
        });
        if let Some(long) = long.filter(|_| line.starts_with(' ')) {
            let flag = long.split([' ', '=', '[', '<']).next().unwrap().to_owned();
            options.push(Listed { flag, env: None });
        }
        if let Some((_, rest)) = line.split_once("[env: ") {
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_uppercase() || *c == '_' || c.is_ascii_digit()).collect();
            options.last_mut().expect("an [env: …] after an option").env = Some(name);
        }
    }
    assert!(options.len() > 40, "the help lists every setting: {text}");
    options
}

/// A valid value for each setting `serve` takes, for a server on `port`
/// with its files in `dir`; several values for a repeated flag. `None` for
/// an option that is not a setting.
fn valid(flag: &str, dir: &Path, port: u16) -> Option<Vec<String>> {
    let at = |name: &str| dir.join(name).display().to_string();
    let one = |value: &str| Some(vec![value.to_owned()]);
    match flag {
        "help" | "stdio" => None,
        "config" => one(&at("settings.toml")),
        "listen" => one(&format!("127.0.0.1:{port}")),
        "data-dir" => one(&at("data")),
        "database-url" => one(&format!("sqlite:{}", at("settings-reach.db"))),
        "demo" | "console" | "egress-allow-private" => one("true"),
        "demo-postgres" => one("off"),
        "public-url" => one(&format!("http://127.0.0.1:{port}")),
        "allowed-host" => Some(vec!["127.0.0.1".into(), "localhost".into()]),
        "trusted-proxy" => Some(vec!["10.0.0.1".into(), "fd00::1".into()]),
        "allowed-origin" => Some(vec![format!("http://127.0.0.1:{port}"), "https://agents.example".into()]),
        "retention" => one("PT1H"),
        "max-body-bytes" => one("2097152"),
        "request-timeout-ms" => one("60000"),
        "approval-wait-ms" => one("1000"),
        "header-read-timeout-ms" => one("5000"),
        "body-read-timeout-ms" => one("10000"),
        "max-connections" => one("512"),
        "validate-fuel" | "execute-fuel" => one("200000000"),
        "validate-timeout-ms" => one("2000"),
        "execute-timeout-ms" => one("5000"),
        "memory-bytes" => one("67108864"),
        "core-instances-per-component" => one("8"),
        "run-instances" => one("64"),
        "run-core-instances" => one("512"),
        "run-memories" => one("128"),
        "validation-instances" => one("8"),
        "queue-length" => one("256"),
        "queue-per-tenant" => one("16"),
        "run-wait-ms" => one("2000"),
        "validation-wait-ms" => one("1000"),
        "idempotency-lease-ms" => one("30000"),
        "idempotency-renew-ms" => one("10000"),
        "auth" => one("jwt"),
        "tenant-claim" => one("org"),
        "jwt-issuer" => Some(vec!["https://one.example".into(), "https://two.example".into()]),
        "jwt-jwks-url" => Some(vec!["https://one.example/jwks.json".into(), "https://two.example/jwks.json".into()]),
        "admin-token" => one("settings-reach-admin-token-0123456789abcdef"),
        "language" => one(&at("language.wasm")),
        "metrics-listen" => one("127.0.0.1:0"),
        "metrics-token" => one("settings-reach-metrics-token-0123456789ab"),
        "otlp-endpoint" => one("http://127.0.0.1:9"),
        "log-format" => one("json"),
        other => panic!(
            "`pilotage serve --help` lists --{other}, which this test has no valid value for: add one to `valid` so the setting is proved reachable"
        ),
    }
}

/// How a setting is given: on the command line or in the environment.
#[derive(Clone, Copy, Debug)]
enum Channel {
    Flags,
    Variables,
}

/// Starts `pilotage serve` with every listed setting given its valid value
/// through `channel`, and checks the server took them: JWT authentication
/// (an agent without a token gets 401 naming the public URL's metadata),
/// the console, the admin token.
async fn serves_with_every_setting(channel: Channel) {
    pilotage_client::install_crypto_provider();
    let dir = std::env::temp_dir().join(crate::endpoint::unique("settings-reach"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("settings.toml"), "max_connections = 256\n").unwrap();
    std::fs::write(dir.join("language.wasm"), pilotage_bundled::SQL).unwrap();
    let port = crate::fleet::free_port();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_pilotage"));
    command.arg("serve");
    // Only what this test gives: none of the caller's PILOTAGE_* variables.
    for (name, _) in std::env::vars() {
        if name.starts_with("PILOTAGE_") {
            command.env_remove(name);
        }
    }
    let mut given = 0;
    for option in listed() {
        let Some(values) = valid(&option.flag, &dir, port) else { continue };
        given += 1;
        match channel {
            Channel::Flags => {
                for value in &values {
                    command.arg(format!("--{}={value}", option.flag));
                }
            }
            Channel::Variables => {
                let name = option.env.unwrap_or_else(|| panic!("--{} has no environment variable", option.flag));
                command.env(name, values.join(","));
            }
        }
    }
    assert!(given > 40, "{given} settings given");
    let (mut child, url) = crate::support::spawn_serving(&mut command).await;
    let base = format!("http://127.0.0.1:{port}");
    assert_eq!(url, format!("{base}/mcp"), "{channel:?}");
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let agent = crate::endpoint::raw_post(&url, ping, &[("content-type", "application/json")]).await;
    assert_eq!(agent.status(), 401, "{channel:?}: --auth=jwt took effect");
    let challenge = agent.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.contains(&format!("{base}/.well-known/oauth-protected-resource")), "{challenge}");
    let admin = |token: &'static str| http.get(format!("{base}/admin/v1/tenants")).bearer_auth(token).send();
    assert_eq!(admin("settings-reach-admin-token-0123456789abcdef").await.unwrap().status(), 200, "{channel:?}");
    assert_eq!(admin("another-admin-token-0123456789abcdef-xyz").await.unwrap().status(), 401, "{channel:?}");
    let console = http.get(format!("{base}/console/sign-in")).send().await.unwrap();
    assert_eq!(console.status(), 200, "{channel:?}: --console=true took effect");
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_setting_serve_lists_is_reachable_by_its_flag() {
    serves_with_every_setting(Channel::Flags).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_setting_serve_lists_is_reachable_by_its_variable() {
    serves_with_every_setting(Channel::Variables).await;
}

/// An optional setting without a default (null until set) takes its value
/// from a flag as from the file: `--egress-allow-private=false` is read as
/// the boolean the setting is, and a value of the wrong kind is refused
/// naming the flag.
#[test]
fn an_optional_boolean_is_set_by_its_flag_and_a_wrong_value_is_refused() {
    for value in ["true", "false"] {
        let out = Command::new(env!("CARGO_BIN_EXE_pilotage"))
            .args(["migrate", "--demo-postgres=off", &format!("--egress-allow-private={value}"), "--data-dir"])
            .arg(std::env::temp_dir().join(crate::endpoint::unique("settings-bool")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{value}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pilotage"))
        .args(["migrate", "--egress-allow-private=maybe", "--data-dir"])
        .arg(std::env::temp_dir().join(crate::endpoint::unique("settings-bool")))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--egress-allow-private") && stderr.contains("boolean"), "{stderr}");
}

/// `--help` names each variable and never prints what it holds: tokens and
/// a database URL's password stay out of terminals and logs.
#[test]
fn help_never_prints_a_variables_value() {
    let secrets = [
        ("PILOTAGE_ADMIN_TOKEN", "admin-secret-4f1c2b7e9d"),
        ("PILOTAGE_METRICS_TOKEN", "metrics-secret-8a3e6c1f5b"),
        ("PILOTAGE_DATABASE_URL", "postgres://pilotage:db-password-2d9b7a@db.example/pilotage"),
        ("PILOTAGE_TOKEN", "agent-secret-6e0d4c8a1f"),
        ("PILOTAGE_SECRET_VALUE", "secret-value-9c5a3e7b2d"),
    ];
    for command in [
        vec!["serve", "--help"],
        vec!["demo", "--help"],
        vec!["migrate", "--help"],
        vec!["client", "--help"],
        vec!["conformance", "--help"],
        vec!["tenant", "--help"],
        vec!["language", "publish", "--help"],
        vec!["secret", "set", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_pilotage")).args(&command).envs(secrets).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{command:?}: {text}");
        for (name, secret) in secrets {
            assert!(!text.contains(secret), "{command:?} printed {name}'s value: {text}");
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pilotage")).args(["serve", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PILOTAGE_ADMIN_TOKEN") && text.contains("PILOTAGE_DATABASE_URL"), "{text}");
}
