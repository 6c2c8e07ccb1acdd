//! The operator commands (`tenant`, `catalog`, `datasource`, `deployment`,
//! `secret`, `language publish`): each drives the admin API (`/admin/v1`)
//! of a running server. `policy` and `approval` are in `approval.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::Value;
use sha2::Digest as _;

use crate::output::{Output, print_value, say};

#[derive(Args)]
pub(crate) struct AdminArgs<C: Subcommand> {
    /// The server's base URL.
    #[arg(long, env = "PILOTAGE_SERVER", default_value = "http://127.0.0.1:8480", global = true)]
    pub(crate) server: String,
    /// The operator token (or a bearer token with an admin scope).
    #[arg(long, env = "PILOTAGE_ADMIN_TOKEN", global = true)]
    pub(crate) admin_token: Option<String>,
    /// How to print the answer (default: a table at a terminal, JSON
    /// otherwise).
    #[arg(long, value_enum, global = true)]
    pub(crate) output: Option<Output>,
    #[command(subcommand)]
    pub(crate) command: C,
}

#[derive(Subcommand)]
pub(crate) enum TenantCommand {
    /// Create a tenant.
    Create {
        /// The tenant id.
        id: String,
        /// A display name.
        #[arg(long)]
        name: Option<String>,
    },
    /// List tenants.
    List,
    /// Show a tenant.
    Get {
        /// The tenant id.
        id: String,
    },
    /// Disable a tenant (its agents are refused).
    Disable {
        /// The tenant id.
        id: String,
    },
    /// Enable a tenant.
    Enable {
        /// The tenant id.
        id: String,
    },
    /// Delete a tenant and everything it owns.
    Delete {
        /// The tenant id.
        id: String,
    },
    /// Upload a Language component for a tenant (alias of `language publish`).
    Publish {
        /// The tenant id.
        id: String,
        /// The component file.
        component: PathBuf,
    },
    /// List the identity providers trusted for a tenant.
    Issuers {
        /// The tenant id.
        id: String,
    },
    /// Trust an identity provider for a tenant: its tokens act in that
    /// tenant only and never grant pilotage:admin (replaces the issuer's
    /// earlier entry).
    Trust {
        /// The tenant id.
        id: String,
        /// The `iss` its tokens carry, byte for byte.
        #[arg(long)]
        issuer: String,
        /// Where its signing keys are published.
        #[arg(long)]
        jwks_url: String,
        /// An accepted algorithm (repeatable; default RS256 and ES256).
        #[arg(long = "algorithm")]
        algorithms: Vec<String>,
        /// The `aud` its tokens carry for the MCP resource, when not its
        /// URL (Entra ID: the API's client id).
        #[arg(long)]
        audience: Option<String>,
        /// The `aud` its tokens carry for the admin side, when not
        /// `<public url>/admin/v1`.
        #[arg(long)]
        admin_audience: Option<String>,
        /// The claim naming the tenant, when its tokens name one.
        #[arg(long)]
        tenant_claim: Option<String>,
        /// Name the tenant by the resource the token was issued for
        /// (`<public url>/t/{tenant}/mcp`) instead of a claim.
        #[arg(long)]
        tenant_from_resource: bool,
        /// A scope it may grant (repeatable; default: every one).
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// Require RFC 9068 access tokens (`typ` at+jwt).
        #[arg(long)]
        access_token_type: bool,
        /// It issues DPoP-bound tokens (RFC 9449): accept them with a
        /// valid proof.
        #[arg(long)]
        dpop: bool,
        /// The claim naming the person's groups or roles (`groups`,
        /// `roles`), read through `--role`.
        #[arg(long)]
        roles_claim: Option<String>,
        /// `ROLE=SCOPE[,SCOPE…]`: the scopes a value of the roles claim
        /// grants (repeatable), within what the issuer may grant.
        #[arg(long = "role", value_parser = role_scopes)]
        roles: Vec<(String, Vec<String>)>,
    },
    /// Stop trusting an identity provider for a tenant.
    Distrust {
        /// The tenant id.
        id: String,
        /// The `iss` to stop trusting.
        #[arg(long)]
        issuer: String,
    },
    /// What a tenant's Runs used per UTC day, by kind and outcome, with
    /// totals (kept when the Runs expire).
    Usage {
        /// The tenant id.
        id: String,
        /// The first day, YYYY-MM-DD (default: 29 days before --to).
        #[arg(long)]
        from: Option<String>,
        /// The last day, included (default: today, UTC).
        #[arg(long)]
        to: Option<String>,
        /// Print CSV, for a spreadsheet or a billing system.
        #[arg(long)]
        csv: bool,
    },
    /// Show or change a tenant's quotas.
    #[command(subcommand)]
    Quotas(QuotasCommand),
    /// Show or replace where a tenant may make the platform connect.
    #[command(subcommand)]
    Egress(EgressCommand),
}

#[derive(Subcommand)]
pub(crate) enum QuotasCommand {
    /// Show a tenant's quotas.
    Get {
        /// The tenant id.
        id: String,
    },
    /// Change the quotas named; the others keep their values.
    Set {
        /// The tenant id.
        id: String,
        #[command(flatten)]
        quotas: QuotaFlags,
    },
}

/// One flag per quota (`pilotage_server::tenancy::Quotas`), each optional.
#[derive(Args)]
pub(crate) struct QuotaFlags {
    /// Runs executing at once, per replica.
    #[arg(long)]
    max_concurrent_runs: Option<u32>,
    /// Tool calls per second, per replica.
    #[arg(long)]
    requests_per_second: Option<u32>,
    /// Bytes of stored Run records, fleet-wide.
    #[arg(long)]
    max_stored_run_bytes: Option<u64>,
    /// Deployments installed at once.
    #[arg(long)]
    max_deployments: Option<u32>,
    /// Firings of one deployment per minute.
    #[arg(long)]
    max_firings_per_minute: Option<u32>,
    /// Wall-time bound of a Run started as an MCP task, in milliseconds.
    #[arg(long)]
    task_wall_time_ms: Option<u64>,
}

impl QuotaFlags {
    /// The quotas named, as `(member, value)`.
    fn named(&self) -> Vec<(&'static str, u64)> {
        [
            ("max_concurrent_runs", self.max_concurrent_runs.map(u64::from)),
            ("requests_per_second", self.requests_per_second.map(u64::from)),
            ("max_stored_run_bytes", self.max_stored_run_bytes),
            ("max_deployments", self.max_deployments.map(u64::from)),
            ("max_firings_per_minute", self.max_firings_per_minute.map(u64::from)),
            ("task_wall_time_ms", self.task_wall_time_ms),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
    }
}

#[derive(Subcommand)]
pub(crate) enum EgressCommand {
    /// Show where a tenant may make the platform connect.
    Get {
        /// The tenant id.
        id: String,
    },
    /// Replace the tenant's egress policy whole.
    Set {
        /// The tenant id.
        id: String,
        /// A CIDR (`10.1.0.0/16`, a bare address) or host name
        /// (`broker.example.com`, `*.example.com`) the tenant may reach
        /// (repeatable).
        #[arg(long = "allow")]
        allow: Vec<String>,
        /// Every MQTT topic filter of the tenant must be this topic or lie
        /// below it.
        #[arg(long)]
        mqtt_topic_prefix: Option<String>,
        /// Set nothing: public addresses only, any topic (needed when
        /// neither --allow nor --mqtt-topic-prefix is given, so a bare
        /// `set` never clears a policy by accident).
        #[arg(long, conflicts_with_all = ["allow", "mqtt_topic_prefix"])]
        public_only: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum CatalogCommand {
    /// Make a tenant's catalog exactly the entries of a JSON file
    /// (`{"entries": [...]}` or an array); reports added, modified, removed.
    Apply {
        /// The tenant.
        tenant: String,
        /// The file.
        file: PathBuf,
    },
    /// List a tenant's catalog entries.
    Ls {
        /// The tenant.
        tenant: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum DatasourceCommand {
    /// Register (or replace) a PostgreSQL data source for a Language; the
    /// database is introspected into the tenant's catalog.
    Add {
        /// The tenant.
        tenant: String,
        /// The data source's name.
        name: String,
        /// postgres://user:password@host:port/database (sealed at rest).
        #[arg(long, env = "PILOTAGE_DATASOURCE_URL")]
        url: String,
        /// A schema to expose (repeatable; at least one).
        #[arg(long = "schema", required = true)]
        schemas: Vec<String>,
        /// The Language.
        #[arg(long, default_value = "sql/postgres-15")]
        language: String,
        /// SCOPE=schema[.relation]: only callers holding SCOPE see it
        /// (repeatable).
        #[arg(long = "visible-to")]
        visibility: Vec<String>,
    },
    /// List a tenant's data sources.
    Ls {
        /// The tenant.
        tenant: String,
    },
    /// Introspect a data source now and print the catalog change.
    Refresh {
        /// The tenant.
        tenant: String,
        /// The data source's name.
        name: String,
    },
    /// Detach a data source and remove its catalog entries.
    Rm {
        /// The tenant.
        tenant: String,
        /// The data source's name.
        name: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum DeploymentCommand {
    /// List a tenant's deployments.
    Ls {
        /// The tenant.
        tenant: String,
    },
    /// Show one deployment, its body and its latest firings.
    Get {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
        /// How many firings to show.
        #[arg(long, default_value_t = 20)]
        firings: u32,
    },
    /// Stop a deployment's triggers.
    Disable {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
    /// Resume a deployment's triggers (missed schedule ticks never fire).
    Enable {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
    /// Remove a deployment.
    Rm {
        /// The tenant.
        tenant: String,
        /// The deployment's name.
        name: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum SecretCommand {
    /// Store a secret, sealed at rest.
    Set {
        /// The tenant.
        tenant: String,
        /// The secret's name (e.g. webhook:home, mqtt:house).
        name: String,
        /// The value (prefer the environment variable: it stays out of
        /// the shell's history).
        #[arg(long, env = "PILOTAGE_SECRET_VALUE", hide_env_values = true)]
        value: String,
    },
    /// List a tenant's secret names (never their values).
    Ls {
        /// The tenant.
        tenant: String,
    },
    /// Delete a secret.
    Rm {
        /// The tenant.
        tenant: String,
        /// The secret's name.
        name: String,
    },
}

/// A small client of the admin API.
pub(crate) struct AdminClient {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl AdminClient {
    pub(crate) fn new(server: &str, token: Option<&str>) -> AdminClient {
        pilotage_client::install_crypto_provider();
        AdminClient {
            http: reqwest::Client::new(),
            base: format!("{}/admin/v1", server.trim_end_matches('/')),
            token: token.map(str::to_owned),
        }
    }

    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: &str,
    ) -> Result<Value> {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("content-type", content_type).body(body);
        }
        let response = request.send().await.with_context(|| format!("cannot reach {}", self.base))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value: Value =
            if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap_or(Value::String(text)) };
        if !status.is_success() {
            // A refused upload: its lint findings as lines, not nested JSON.
            if let Some(findings) = refusal_findings(&value) {
                bail!("{} ({status})\n{findings}", refusal_sentence(&value));
            }
            bail!("{} ({status})", refusal_sentence(&value));
        }
        Ok(value)
    }

    /// A GET answered with text (CSV), refused as [`AdminClient::send`]
    /// refuses.
    pub(crate) async fn text(&self, path: &str) -> Result<String> {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.with_context(|| format!("cannot reach {}", self.base))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
            bail!("{} ({status})", refusal_sentence(&body));
        }
        Ok(text)
    }

    pub(crate) async fn json(&self, method: reqwest::Method, path: &str, body: &Value) -> Result<Value> {
        self.send(method, path, Some(serde_json::to_vec(body)?), "application/json").await
    }
}

pub(crate) async fn publish(
    server: &str,
    token: Option<&str>,
    tenant: &str,
    component: &std::path::Path,
    output: Option<Output>,
) -> Result<ExitCode> {
    let output = Output::chosen(output);
    let bytes = std::fs::read(component).with_context(|| format!("cannot read {}", component.display()))?;
    let client = AdminClient::new(server, token);
    // A component the tenant already serves is not sent again: the author's
    // loop can publish after every build without waiting on an upload and a
    // compilation that would change nothing. A failed look-up just uploads
    // (the upload then says what is wrong).
    let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
    if let Ok(listed) = client.send(reqwest::Method::GET, &format!("/tenants/{tenant}/languages"), None, "").await
        && let Some(serving) = listed["languages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|language| language["sha256"] == sha256.as_str() && language["active"] == true)
    {
        eprintln!(
            "{} already serves tenant {tenant} with these bytes (sha256 {}): nothing uploaded",
            serving["name"].as_str().unwrap_or("the Language"),
            &sha256[..12]
        );
        print_value(serving, output)?;
        return Ok(ExitCode::SUCCESS);
    }
    eprint!("uploading {} ({} KiB) to tenant {tenant}… ", component.display(), bytes.len() / 1024);
    let started = std::time::Instant::now();
    let result = client
        .send(reqwest::Method::POST, &format!("/tenants/{tenant}/languages"), Some(bytes), "application/wasm")
        .await;
    match result {
        Ok(value) => {
            eprintln!("done in {} ms (compiled, described, linted)", started.elapsed().as_millis());
            print_value(&value, output)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("refused");
            Err(error)
        }
    }
}

/// What a refusal's body says, as one plain sentence: the API's
/// `error.message`, else the body's first line (a proxy's page, say), cut
/// at 200 characters; never a dump of the body.
fn refusal_sentence(body: &Value) -> String {
    let text = match body {
        Value::Null => return "the server gave no reason".to_owned(),
        Value::String(text) => text.clone(),
        other => other["error"]["message"].as_str().map_or_else(|| other.to_string(), str::to_owned),
    };
    let line = text.lines().find(|line| !line.trim().is_empty()).unwrap_or_default().trim();
    match line.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_owned(),
    }
}

/// The lint findings of a refused upload's body, one per line as
/// `pilotage language check` prints them, or `None` when the body has none.
pub(crate) fn refusal_findings(body: &Value) -> Option<String> {
    let findings = body["error"]["findings"].as_array().filter(|f| !f.is_empty())?;
    let lines: Vec<String> = findings
        .iter()
        .map(|f| {
            let text = |name: &str| f[name].as_str().unwrap_or_default().to_owned();
            format!("  {} [{}] {}\n    fix: {}", text("severity"), text("rule"), text("message"), text("fix"))
        })
        .collect();
    Some(lines.join("\n"))
}

pub(crate) async fn tenant_command(args: AdminArgs<TenantCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    let value = match args.command {
        TenantCommand::Create { id, name } => {
            let mut body = serde_json::json!({"id": id});
            if let Some(name) = name {
                body["name"] = Value::String(name);
            }
            client.json(reqwest::Method::POST, "/tenants", &body).await?
        }
        TenantCommand::List => client.send(reqwest::Method::GET, "/tenants", None, "").await?,
        TenantCommand::Get { id } => client.send(reqwest::Method::GET, &format!("/tenants/{id}"), None, "").await?,
        TenantCommand::Disable { id } => {
            client
                .json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &serde_json::json!({"disabled": true}))
                .await?
        }
        TenantCommand::Enable { id } => {
            client
                .json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &serde_json::json!({"disabled": false}))
                .await?
        }
        TenantCommand::Delete { id } => {
            client.send(reqwest::Method::DELETE, &format!("/tenants/{id}"), None, "").await?
        }
        TenantCommand::Publish { id, component } => {
            return publish(&args.server, args.admin_token.as_deref(), &id, &component, args.output).await;
        }
        TenantCommand::Issuers { id } => {
            client.send(reqwest::Method::GET, &format!("/tenants/{id}"), None, "").await?["issuers"].take()
        }
        TenantCommand::Trust {
            id,
            issuer,
            jwks_url,
            algorithms,
            audience,
            admin_audience,
            tenant_claim,
            tenant_from_resource,
            scopes,
            access_token_type,
            dpop,
            roles_claim,
            roles,
        } => {
            let mut entry = serde_json::json!({"issuer": issuer, "jwks_url": jwks_url});
            if !algorithms.is_empty() {
                entry["algorithms"] = serde_json::json!(algorithms);
            }
            for (name, value) in
                [("audience", audience), ("admin_audience", admin_audience), ("tenant_claim", tenant_claim)]
            {
                if let Some(value) = value {
                    entry[name] = Value::String(value);
                }
            }
            if tenant_from_resource {
                entry["tenant_from"] = Value::String("resource".into());
            }
            if !scopes.is_empty() {
                entry["scopes"] = serde_json::json!(scopes);
            }
            if access_token_type {
                entry["access_token_type"] = Value::Bool(true);
            }
            if dpop {
                entry["dpop"] = Value::Bool(true);
            }
            if let Some(claim) = roles_claim {
                entry["roles_claim"] = Value::String(claim);
            }
            if !roles.is_empty() {
                entry["role_scopes"] =
                    roles.into_iter().map(|(role, scopes)| (role, serde_json::json!(scopes))).collect();
            }
            let mut issuers = tenant_issuers(&client, &id).await?;
            issuers.retain(|held| held["issuer"].as_str() != Some(issuer.as_str()));
            issuers.push(entry);
            let body = serde_json::json!({"issuers": issuers});
            client.json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &body).await?["issuers"].take()
        }
        TenantCommand::Usage { id, from, to, csv } => {
            let mut path = format!("/tenants/{id}/usage?format={}", if csv { "csv" } else { "json" });
            for (name, day) in [("from", from), ("to", to)] {
                if let Some(day) = day {
                    path.push_str(&format!("&{name}={day}"));
                }
            }
            if csv {
                let text = client.text(&path).await?;
                say!("{}", text.trim_end());
                return Ok(ExitCode::SUCCESS);
            }
            client.send(reqwest::Method::GET, &path, None, "").await?
        }
        TenantCommand::Quotas(QuotasCommand::Get { id }) => tenant_member(&client, &id, "quotas").await?,
        TenantCommand::Quotas(QuotasCommand::Set { id, quotas }) => {
            let named = quotas.named();
            if named.is_empty() {
                bail!("name at least one quota to change (see `pilotage tenant quotas set --help`)");
            }
            // The API replaces the quotas whole: start from the tenant's.
            let mut changed = tenant_member(&client, &id, "quotas").await?;
            for (name, value) in named {
                changed[name] = Value::from(value);
            }
            let body = serde_json::json!({"quotas": changed});
            client.json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &body).await?["quotas"].take()
        }
        TenantCommand::Egress(EgressCommand::Get { id }) => tenant_member(&client, &id, "egress").await?,
        TenantCommand::Egress(EgressCommand::Set { id, allow, mqtt_topic_prefix, public_only }) => {
            if allow.is_empty() && mqtt_topic_prefix.is_none() && !public_only {
                bail!("name what the tenant may reach (--allow, --mqtt-topic-prefix), or --public-only to clear it");
            }
            let mut egress = serde_json::json!({});
            if !allow.is_empty() {
                egress["allow"] = serde_json::json!(allow);
            }
            if let Some(prefix) = mqtt_topic_prefix {
                egress["mqtt_topic_prefix"] = Value::String(prefix);
            }
            let body = serde_json::json!({"egress": egress});
            client.json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &body).await?["egress"].take()
        }
        TenantCommand::Distrust { id, issuer } => {
            let mut issuers = tenant_issuers(&client, &id).await?;
            let before = issuers.len();
            issuers.retain(|held| held["issuer"].as_str() != Some(issuer.as_str()));
            if issuers.len() == before {
                anyhow::bail!("tenant '{id}' does not trust {issuer}");
            }
            let body = serde_json::json!({"issuers": issuers});
            client.json(reqwest::Method::PATCH, &format!("/tenants/{id}"), &body).await?["issuers"].take()
        }
    };
    if !value.is_null() {
        print_value(&value, output)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One member of `tenant` as the admin API shows it.
async fn tenant_member(client: &AdminClient, tenant: &str, member: &str) -> Result<Value> {
    Ok(client.send(reqwest::Method::GET, &format!("/tenants/{tenant}"), None, "").await?[member].take())
}

/// The issuers `tenant` trusts, as the admin API shows them.
/// Parses `ROLE=SCOPE[,SCOPE…]` (`tenant trust --role`).
///
/// # Errors
/// A sentence naming the expected form when there is no `=`, no role or
/// no scope.
fn role_scopes(text: &str) -> std::result::Result<(String, Vec<String>), String> {
    let (role, scopes) = text.split_once('=').ok_or_else(|| format!("'{text}' is not ROLE=SCOPE[,SCOPE…]"))?;
    let scopes: Vec<String> = scopes.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if role.trim().is_empty() || scopes.is_empty() {
        return Err(format!("'{text}' is not ROLE=SCOPE[,SCOPE…]: name a role and at least one scope"));
    }
    Ok((role.trim().to_owned(), scopes))
}

async fn tenant_issuers(client: &AdminClient, tenant: &str) -> Result<Vec<Value>> {
    let shown = client.send(reqwest::Method::GET, &format!("/tenants/{tenant}"), None, "").await?;
    Ok(shown["issuers"].as_array().cloned().unwrap_or_default())
}

pub(crate) async fn datasource_command(args: AdminArgs<DatasourceCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    let value = match args.command {
        DatasourceCommand::Add { tenant, name, url, schemas, language, visibility } => {
            let mut rules = serde_json::Map::new();
            for rule in visibility {
                let Some((scope, relation)) = rule.split_once('=') else {
                    bail!("--visible-to {rule}: use SCOPE=schema or SCOPE=schema.relation");
                };
                let scopes = rules.entry(relation.to_owned()).or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(scopes) = scopes {
                    scopes.push(Value::String(scope.to_owned()));
                }
            }
            let body = serde_json::json!({"url": url, "schemas": schemas, "language": language, "visibility": rules});
            client.json(reqwest::Method::PUT, &format!("/tenants/{tenant}/data-sources/{name}"), &body).await?
        }
        DatasourceCommand::Ls { tenant } => {
            client.send(reqwest::Method::GET, &format!("/tenants/{tenant}/data-sources"), None, "").await?
        }
        DatasourceCommand::Refresh { tenant, name } => {
            let path = format!("/tenants/{tenant}/data-sources/{name}/refresh");
            client.send(reqwest::Method::POST, &path, None, "").await?
        }
        DatasourceCommand::Rm { tenant, name } => {
            client.send(reqwest::Method::DELETE, &format!("/tenants/{tenant}/data-sources/{name}"), None, "").await?
        }
    };
    if !value.is_null() {
        print_value(&value, output)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn deployment_command(args: AdminArgs<DeploymentCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    let (method, path) = match args.command {
        DeploymentCommand::Ls { tenant } => (reqwest::Method::GET, format!("/tenants/{tenant}/deployments")),
        DeploymentCommand::Get { tenant, name, firings } => {
            (reqwest::Method::GET, format!("/tenants/{tenant}/deployments/{name}?firings={firings}"))
        }
        DeploymentCommand::Disable { tenant, name } => {
            (reqwest::Method::POST, format!("/tenants/{tenant}/deployments/{name}/disable"))
        }
        DeploymentCommand::Enable { tenant, name } => {
            (reqwest::Method::POST, format!("/tenants/{tenant}/deployments/{name}/enable"))
        }
        DeploymentCommand::Rm { tenant, name } => {
            (reqwest::Method::DELETE, format!("/tenants/{tenant}/deployments/{name}"))
        }
    };
    let value = client.send(method, &path, None, "").await?;
    if !value.is_null() {
        print_value(&value, output)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn secret_command(args: AdminArgs<SecretCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    let value = match args.command {
        SecretCommand::Set { tenant, name, value } => {
            let body = serde_json::json!({"value": value});
            client.json(reqwest::Method::PUT, &format!("/tenants/{tenant}/secrets/{name}"), &body).await?
        }
        SecretCommand::Ls { tenant } => {
            client.send(reqwest::Method::GET, &format!("/tenants/{tenant}/secrets"), None, "").await?
        }
        SecretCommand::Rm { tenant, name } => {
            client.send(reqwest::Method::DELETE, &format!("/tenants/{tenant}/secrets/{name}"), None, "").await?
        }
    };
    if !value.is_null() {
        print_value(&value, output)?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn catalog_command(args: AdminArgs<CatalogCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    match args.command {
        CatalogCommand::Apply { tenant, file } => {
            let value = read_json(&file)?;
            let body = match value {
                Value::Array(entries) => serde_json::json!({"entries": entries}),
                other => other,
            };
            let report = client.json(reqwest::Method::POST, &format!("/tenants/{tenant}/catalog/apply"), &body).await?;
            print_value(&report, output)?;
        }
        CatalogCommand::Ls { tenant } => {
            let mut after: Option<String> = None;
            loop {
                let path = match &after {
                    Some(after) => format!("/tenants/{tenant}/catalog/entries?after={after}"),
                    None => format!("/tenants/{tenant}/catalog/entries"),
                };
                let page = client.send(reqwest::Method::GET, &path, None, "").await?;
                for entry in page["entries"].as_array().cloned().unwrap_or_default() {
                    say!(
                        "{}\t{}\t{}\t{}",
                        entry["id"].as_str().unwrap_or(""),
                        entry["kind"].as_str().unwrap_or(""),
                        entry["risk"].as_str().unwrap_or(""),
                        entry["name"].as_str().unwrap_or("")
                    );
                }
                match page["next_after"].as_str() {
                    Some(next) => after = Some(next.to_owned()),
                    None => break,
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn read_json(path: &PathBuf) -> Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}
