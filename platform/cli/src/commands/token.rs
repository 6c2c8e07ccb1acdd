//! `pilotage token mint`: development tokens, accepted by servers running
//! `--auth dev` with the same data folder.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Subcommand;

use crate::output::say;

#[derive(Subcommand)]
pub(crate) enum TokenCommand {
    /// Issue a development token (accepted by servers running --auth dev
    /// with the same data folder; refused when the folder holds no
    /// server's development secret).
    Mint {
        /// The data folder holding the development secret.
        #[arg(long, env = "PILOTAGE_DATA_DIR", default_value = ".pilotage")]
        data_dir: PathBuf,
        /// The server's public URL (the token's audience is <url>/mcp, or
        /// <url>/admin/v1 when its scopes are admin-side ones).
        #[arg(long, env = "PILOTAGE_PUBLIC_URL", default_value = "http://127.0.0.1:8480")]
        public_url: String,
        /// The tenant.
        #[arg(long, default_value = "demo")]
        tenant: String,
        /// The subject.
        #[arg(long, default_value = "dev")]
        subject: String,
        /// Scopes (repeatable).
        #[arg(long = "scope")]
        scopes: Vec<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
    },
}

pub(crate) fn token_mint(
    data_dir: &std::path::Path,
    public_url: &str,
    tenant: &str,
    subject: &str,
    scopes: &[String],
    ttl: u64,
) -> Result<ExitCode> {
    let audience = format!("{}/mcp", public_url.trim_end_matches('/'));
    let tokens = pilotage_server::auth::dev::DevTokens::open(data_dir, audience).map_err(anyhow::Error::msg)?;
    say!("{}", tokens.mint(tenant, subject, scopes, ttl).map_err(anyhow::Error::msg)?);
    Ok(ExitCode::SUCCESS)
}
