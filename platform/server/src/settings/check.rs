//! Cross-field consistency of the settings ([`Settings::check`]): each
//! value within its domain, and the values that bound one another in
//! agreement, checked in a fixed order so the first inconsistency is the
//! one named.

use super::{ConfigError, MAX_CONNECTIONS_LIMIT, Settings};

impl Settings {
    /// Checks cross-field consistency.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first inconsistent setting.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.retention()?;
        self.check_limits()?;
        self.check_policies()?;
        self.check_timing()?;
        self.check_listener()?;
        self.idempotency.check().map_err(|(field, message)| ConfigError::Invalid { field, message })?;
        self.egress.check().map_err(|(field, message)| ConfigError::Invalid { field, message })?;
        self.server_card.check().map_err(|(field, message)| ConfigError::Invalid { field, message })?;
        if let Some(url) = &self.public_url
            && reqwest::Url::parse(url).is_err()
        {
            return Err(ConfigError::Invalid { field: "public_url", message: format!("'{url}' is not a URL") });
        }
        self.check_auth()?;
        if !self.languages.is_empty() && !self.demo {
            return Err(ConfigError::Invalid {
                field: "languages",
                message: "Language files are served for the demo tenant; they need the demo (remove --demo=false)"
                    .into(),
            });
        }
        self.check_observability()?;
        Ok(())
    }

    /// Sizes and counts within their domains: request, admin and
    /// component bytes, sessions per principal within those per tenant,
    /// the engine's pool of core instances.
    fn check_limits(&self) -> Result<(), ConfigError> {
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid { field: "max_body_bytes", message: "must be at least 1024".into() });
        }
        if self.admin_max_body_bytes < 1024 {
            return Err(ConfigError::Invalid {
                field: "admin_max_body_bytes",
                message: "must be at least 1024".into(),
            });
        }
        if self.max_component_bytes < 1024 {
            return Err(ConfigError::Invalid { field: "max_component_bytes", message: "must be at least 1024".into() });
        }
        if self.max_sessions_per_principal == 0 || self.max_sessions_per_principal > self.max_sessions_per_tenant {
            return Err(ConfigError::Invalid {
                field: "max_sessions_per_principal",
                message: format!(
                    "must be at least 1 and at most max_sessions_per_tenant ({})",
                    self.max_sessions_per_tenant
                ),
            });
        }
        if !(1..=1024).contains(&self.bounds.core_instances_per_component) {
            return Err(ConfigError::Invalid {
                field: "bounds.core_instances_per_component",
                message: "must be between 1 and 1024 (the engine's pool of core instances)".into(),
            });
        }
        Ok(())
    }

    /// Each tenant policy's members within their ranges.
    fn check_policies(&self) -> Result<(), ConfigError> {
        for (tenant, policy) in &self.policies {
            if let Err(crate::policy::PolicyError::OutOfRange { member, message }) = policy.check() {
                return Err(ConfigError::Invalid {
                    field: "policies",
                    message: format!("policies.{tenant}.{member}: {message}"),
                });
            }
        }
        Ok(())
    }

    /// Times that bound one another: a request outlives the longest Run
    /// and its wait for a place, the capacity queue and waits are at
    /// least 1, and the read timeouts are not zero.
    fn check_timing(&self) -> Result<(), ConfigError> {
        let longest_run = self.bounds.execution.wall_time_ms.saturating_add(self.capacity.run_wait_ms);
        if self.request_timeout_ms <= longest_run {
            return Err(ConfigError::Invalid {
                field: "request_timeout_ms",
                message: format!(
                    "must exceed the execution wall-time bound ({} ms) plus the longest wait for a Run's place (capacity.run_wait_ms, {} ms), or long Runs would be cut off mid-response",
                    self.bounds.execution.wall_time_ms, self.capacity.run_wait_ms
                ),
            });
        }
        let capacity = &self.capacity;
        for (field, value, low) in [
            ("capacity.queue_per_tenant", u64::from(capacity.queue_per_tenant), 1),
            ("capacity.validation_wait_ms", capacity.validation_wait_ms, 1),
            ("capacity.run_wait_ms", capacity.run_wait_ms, 1),
        ] {
            if value < low {
                return Err(ConfigError::Invalid { field, message: format!("must be at least {low}") });
            }
        }
        if capacity.nested_percent > 50 {
            return Err(ConfigError::Invalid {
                field: "capacity.nested_percent",
                message: "must be at most 50 (the rest of each pool is what admission lets in)".into(),
            });
        }
        for (field, value) in [
            ("header_read_timeout_ms", self.header_read_timeout_ms),
            ("body_read_timeout_ms", self.body_read_timeout_ms),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid { field, message: "must be at least 1 (milliseconds)".into() });
            }
        }
        Ok(())
    }

    /// The HTTP edge: the connection limit, the allowed origins and the
    /// trusted proxies.
    fn check_listener(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections) {
            return Err(ConfigError::Invalid {
                field: "max_connections",
                message: format!("must be between 1 and {MAX_CONNECTIONS_LIMIT}"),
            });
        }
        for origin in &self.allowed_origins {
            if let Err(error) = crate::origins::AllowedOrigin::parse(origin) {
                return Err(ConfigError::Invalid { field: "allowed_origins", message: error.to_string() });
            }
        }
        self.trusted_proxies()?;
        Ok(())
    }

    /// Authentication: dev mode only on loopback, jwt mode with issuers,
    /// the console's sign-in issuer among them, each issuer listed once.
    fn check_auth(&self) -> Result<(), ConfigError> {
        match self.auth.mode {
            crate::auth::AuthMode::Dev if !self.listen.ip().is_loopback() => {
                return Err(ConfigError::Invalid {
                    field: "auth",
                    message: format!("dev authentication only runs on loopback, not {}; use --auth jwt", self.listen),
                });
            }
            crate::auth::AuthMode::Jwt if self.auth.issuers.is_empty() => {
                return Err(ConfigError::Invalid {
                    field: "auth",
                    message: "--auth jwt needs at least one --jwt-issuer with its --jwt-jwks-url".into(),
                });
            }
            _ => {}
        }
        if let Some(sign_in) = &self.console_sign_in
            && (self.auth.mode != crate::auth::AuthMode::Jwt
                || !self.auth.issuers.iter().any(|issuer| issuer.issuer == sign_in.issuer))
        {
            return Err(ConfigError::Invalid {
                field: "console_sign_in",
                message: format!(
                    "the console signs in with {}, which must be one of auth.issuers under --auth jwt",
                    sign_in.issuer
                ),
            });
        }
        // One entry per issuer: a token is checked against the first entry
        // naming its `iss`, so a second would silently never apply.
        for (n, issuer) in self.auth.issuers.iter().enumerate() {
            if self.auth.issuers[..n].iter().any(|earlier| earlier.issuer == issuer.issuer) {
                return Err(ConfigError::Invalid {
                    field: "auth",
                    message: format!(
                        "the issuer {} is listed twice; list every tenant it serves in one entry's `tenants`",
                        issuer.issuer
                    ),
                });
            }
        }
        Ok(())
    }

    /// The admin and metrics tokens long enough, the metrics listener
    /// apart from the main one, the OTLP endpoint a URL traces can go to.
    fn check_observability(&self) -> Result<(), ConfigError> {
        if self.admin_token.as_ref().is_some_and(|token| token.len() < 16) {
            return Err(ConfigError::Invalid { field: "admin_token", message: "use at least 16 characters".into() });
        }
        if self.metrics_token.as_ref().is_some_and(|token| token.len() < 16) {
            return Err(ConfigError::Invalid { field: "metrics_token", message: "use at least 16 characters".into() });
        }
        if let Some(metrics) = self.metrics_listen
            && metrics.port() != 0
            && metrics == self.listen
        {
            return Err(ConfigError::Invalid {
                field: "metrics_listen",
                message: format!("{metrics} is the main listener; give another address, or use metrics_token alone"),
            });
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            crate::telemetry::otlp::traces_url(endpoint)
                .map_err(|error| ConfigError::Invalid { field: "otlp_endpoint", message: error.to_string() })?;
        }
        Ok(())
    }
}
