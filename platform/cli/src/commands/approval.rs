//! A tenant's policy on risk and its approval requests, through the admin
//! API: `pilotage policy get|set` and `pilotage approval
//! ls|get|approve|reject` (`pilotage_server::policy`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use serde_json::Value;

use super::admin::{AdminArgs, AdminClient};
use crate::output::{Output, print_value};

#[derive(Subcommand)]
pub(crate) enum PolicyCommand {
    /// Show a tenant's policy on risk and its version.
    Get {
        /// The tenant.
        tenant: String,
    },
    /// Replace a tenant's policy with a JSON file (`{"rules": [...],
    /// "budgets": [...], "approval_ttl_s": N}`; `{}` allows everything).
    Set {
        /// The tenant.
        tenant: String,
        /// The file.
        file: PathBuf,
    },
}

#[derive(Subcommand)]
pub(crate) enum ApprovalCommand {
    /// List a tenant's approval requests, newest first.
    Ls {
        /// The tenant.
        tenant: String,
        /// Only this state: pending, approved, rejected, used or expired.
        #[arg(long)]
        state: Option<String>,
    },
    /// Show one approval request with what it is for (plan, program, input).
    Get {
        /// The tenant.
        tenant: String,
        /// The approval id (`apr_…`).
        id: String,
    },
    /// Approve a pending request (never your own).
    Approve {
        /// The tenant.
        tenant: String,
        /// The approval id.
        id: String,
        /// Why, kept in the audit record (at most 500 characters).
        #[arg(long)]
        comment: Option<String>,
    },
    /// Reject a pending request.
    Reject {
        /// The tenant.
        tenant: String,
        /// The approval id.
        id: String,
        /// Why, kept in the audit record (at most 500 characters).
        #[arg(long)]
        comment: Option<String>,
    },
}

pub(crate) async fn policy_command(args: AdminArgs<PolicyCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    let value = match args.command {
        PolicyCommand::Get { tenant } => {
            client.send(reqwest::Method::GET, &format!("/tenants/{tenant}/policy"), None, "").await?
        }
        PolicyCommand::Set { tenant, file } => {
            let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let policy: Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
            client.json(reqwest::Method::PUT, &format!("/tenants/{tenant}/policy"), &policy).await?
        }
    };
    print_value(&value, output)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn approval_command(args: AdminArgs<ApprovalCommand>) -> Result<ExitCode> {
    let client = AdminClient::new(&args.server, args.admin_token.as_deref());
    let output = Output::chosen(args.output);
    let (method, path, comment) = match args.command {
        ApprovalCommand::Ls { tenant, state } => (
            reqwest::Method::GET,
            match state {
                Some(state) => format!("/tenants/{tenant}/approvals?state={state}"),
                None => format!("/tenants/{tenant}/approvals"),
            },
            None,
        ),
        ApprovalCommand::Get { tenant, id } => {
            (reqwest::Method::GET, format!("/tenants/{tenant}/approvals/{id}"), None)
        }
        ApprovalCommand::Approve { tenant, id, comment } => {
            (reqwest::Method::POST, format!("/tenants/{tenant}/approvals/{id}/approve"), comment)
        }
        ApprovalCommand::Reject { tenant, id, comment } => {
            (reqwest::Method::POST, format!("/tenants/{tenant}/approvals/{id}/reject"), comment)
        }
    };
    let answer = match comment {
        Some(comment) => client.json(method, &path, &serde_json::json!({"comment": comment})).await?,
        None => client.send(method, &path, None, "").await?,
    };
    print_value(&answer, output)?;
    Ok(ExitCode::SUCCESS)
}
