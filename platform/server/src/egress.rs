//! Where a tenant may make the platform connect: the destinations a tenant
//! supplies (an MQTT broker's URL, a data source's URL, an HTTP binding's
//! URL) are checked against the operator's confinement when they are
//! registered and again, after name resolution, on every connection the
//! platform opens to them (a new pool connection, an MQTT reconnect, an
//! HTTP connection; a redirect too).
//!
//! Why: without it a tenant administrator points the platform at the
//! operator's own network (`127.0.0.1:5432`, a cloud metadata address, a
//! private subnet) and the platform connects from inside it.
//!
//! The rule, for each address a destination resolves to (every one must
//! pass, since a connector may try any of them):
//! 1. an address inside a CIDR of the tenant's `allow` list, or of the
//!    operator's `egress.allow`, is permitted;
//! 2. otherwise a non-public address (loopback, private, link-local,
//!    carrier-grade NAT, unique-local, multicast, unspecified,
//!    documentation and benchmarking ranges, and IPv4 addresses mapped or
//!    translated into IPv6) is refused, unless `egress.allow_private`
//!    (default: on with the demo, off otherwise);
//! 3. otherwise, when the tenant's `allow` list is not empty, the host
//!    must be one of its names (`broker.example.com`, or `*.example.com`
//!    for any name below it).
//!
//! A Unix socket path counts as non-public. No CIDR reaches it.
//!
//! MQTT topic filters: `$`-topics (`$SYS`, `$share`, `$queue`) are the
//! broker's and are refused everywhere (`deploy::broker::check_filter`);
//! a tenant given `mqtt_topic_prefix` subscribes only to filters below it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

/// How long resolving a destination's name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The operator's settings (`[egress]` in the settings file).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct EgressSettings {
    /// Whether tenants may reach non-public addresses (loopback, private,
    /// link-local, …) without a CIDR for them. Default (unset): on when
    /// the demo is, off otherwise.
    pub allow_private: Option<bool>,
    /// CIDRs every tenant may reach (an operator's database subnet, say),
    /// as `10.1.0.0/16` or a bare address.
    pub allow: Vec<String>,
}

impl EgressSettings {
    /// Checks the operator's `allow` list.
    ///
    /// # Errors
    /// `("egress.allow", message)` naming the first entry that is no CIDR.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        for (index, entry) in self.allow.iter().enumerate() {
            parse_net(entry).ok_or_else(|| ("egress.allow", format!("entry {index}, '{entry}', is not a CIDR")))?;
        }
        Ok(())
    }
}

/// A tenant's confinement, as an operator sets it on the tenant (`egress`
/// on `/admin/v1/tenants/{tenant}`) and the store keeps it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct EgressPolicy {
    /// CIDRs (`203.0.113.0/24`, a bare address) and host names
    /// (`broker.example.com`, `*.example.com`) the tenant may reach. Empty:
    /// any public address.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// When set, every MQTT topic filter of the tenant must be this topic
    /// or lie below it (`acme` admits `acme` and `acme/#`, not `#`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mqtt_topic_prefix: Option<String>,
}

/// Occurs when an [`EgressPolicy`] cannot be used; the message names the
/// member.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EgressPolicyError {
    /// Occurs when an `allow` entry is neither a CIDR nor a host name.
    #[error("egress.allow[{index}]: '{entry}' is neither a CIDR nor a host name (or '*.' and one)")]
    Allow {
        /// Its position.
        index: usize,
        /// The entry.
        entry: String,
    },
    /// Occurs when the MQTT prefix is empty, has a wildcard, starts with
    /// `$` or ends with `/`.
    #[error(
        "egress.mqtt_topic_prefix: '{0}' must be one or more topic levels without '+', '#', a leading '$' or a trailing '/'"
    )]
    Prefix(String),
}

/// Occurs when a destination is refused; the message names the host, the
/// address and what would permit it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DestinationRefused {
    /// Occurs when the destination is, or resolves to, a non-public address
    /// that no CIDR permits.
    #[error(
        "the destination '{host}' is refused: {address} is a loopback, private, link-local or otherwise non-public address; an operator permits it with a CIDR in the tenant's egress allow list"
    )]
    NonPublic {
        /// The host as given.
        host: String,
        /// The address it is or resolved to.
        address: IpAddr,
    },
    /// Occurs when the tenant has an allow list that neither names the host
    /// nor covers the address.
    #[error("the destination '{host}' is refused: it is not in the tenant's egress allow list")]
    NotListed {
        /// The host as given.
        host: String,
    },
    /// Occurs when the destination is a Unix socket.
    #[error("the destination '{0}' is refused: a Unix socket is on the platform's own machine")]
    Socket(String),
    /// Occurs when the name does not resolve (in time).
    #[error("the destination '{host}' does not resolve: {message}")]
    Unresolved {
        /// The host as given.
        host: String,
        /// The resolver's reason.
        message: String,
    },
    /// Occurs when the tenant's confined HTTP client could not be built
    /// (its TLS backend failed to start): every destination is refused
    /// rather than reached by a client without the checks.
    #[error("no destination can be reached: the tenant's confined HTTP client could not be built: {0}")]
    Unconfined(String),
}

/// A policy checked and parsed.
#[derive(Debug, Default)]
struct Parsed {
    nets: Vec<IpNet>,
    names: Vec<String>,
    mqtt_topic_prefix: Option<String>,
    listed: bool,
}

impl EgressPolicy {
    /// Checks every member.
    ///
    /// # Errors
    /// [`EgressPolicyError`] naming the first bad member.
    pub fn check(&self) -> Result<(), EgressPolicyError> {
        self.parse().map(drop)
    }

    fn parse(&self) -> Result<Parsed, EgressPolicyError> {
        let mut parsed = Parsed { listed: !self.allow.is_empty(), ..Parsed::default() };
        for (index, entry) in self.allow.iter().enumerate() {
            if let Some(net) = parse_net(entry) {
                parsed.nets.push(net);
            } else if is_name_pattern(entry) {
                parsed.names.push(normal_name(entry));
            } else {
                return Err(EgressPolicyError::Allow { index, entry: entry.clone() });
            }
        }
        if let Some(prefix) = &self.mqtt_topic_prefix {
            let bad = prefix.is_empty()
                || prefix.starts_with('$')
                || prefix.ends_with('/')
                || prefix.contains(['+', '#', '\0']);
            if bad {
                return Err(EgressPolicyError::Prefix(prefix.clone()));
            }
            parsed.mqtt_topic_prefix = Some(prefix.clone());
        }
        Ok(parsed)
    }
}

/// `10.0.0.0/8` or a bare address (its own /32 or /128).
fn parse_net(entry: &str) -> Option<IpNet> {
    entry.parse::<IpNet>().ok().or_else(|| entry.parse::<IpAddr>().ok().map(IpNet::from)).map(|net| net.trunc())
}

/// A DNS name of letters, digits, `-` and `.`, optionally after `*.`.
fn is_name_pattern(entry: &str) -> bool {
    let name = entry.strip_prefix("*.").unwrap_or(entry).trim_end_matches('.');
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty() && label.len() <= 63 && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

fn normal_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `address` is an ordinary public unicast address (none of the
/// special-purpose ranges of RFC 6890 and its successors that a tenant
/// should not reach by default).
pub fn is_public(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            let segments = v6.segments();
            // NAT64 (64:ff9b::/96) and the local-use 64:ff9b:1::/48 reach
            // IPv4 through a translator: judge the embedded address.
            if segments[0] == 0x64 && segments[1] == 0xff9b {
                if segments[2..6] == [0, 0, 0, 0] {
                    let [a, b] = segments[6].to_be_bytes();
                    let [c, d] = segments[7].to_be_bytes();
                    return is_public_v4(Ipv4Addr::new(a, b, c, d));
                }
                return false;
            }
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                // IPv4-compatible (deprecated) ::/96
                || segments[..6] == [0, 0, 0, 0, 0, 0]
                // unique local fc00::/7, link-local fe80::/10, site-local fec0::/10
                || (segments[0] & 0xfe00) == 0xfc00
                || (segments[0] & 0xffc0) == 0xfe80
                || (segments[0] & 0xffc0) == 0xfec0
                // discard-only 100::/64
                || segments[..4] == [0x100, 0, 0, 0]
                // documentation 2001:db8::/32, 3fff::/20; ORCHID and others in 2001::/23
                || (segments[0] == 0x2001 && segments[1] == 0xdb8)
                || (segments[0] & 0xfff0) == 0x3ff0
                || (segments[0] == 0x2001 && segments[1] < 0x200)
                // 6to4 2002::/16 embeds an IPv4 address a relay reaches
                || segments[0] == 0x2002)
        }
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, c, _] = v4.octets();
    !(a == 0
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b))
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 192 && b == 88 && c == 99)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224)
}

/// The address itself when it is an IPv4 address mapped into IPv6.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// `[::1]` → `::1`; a name unchanged.
fn literal(host: &str) -> Option<IpAddr> {
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    bare.parse::<IpAddr>().ok()
}

/// The rules one tenant's destinations are checked by.
#[derive(Debug)]
struct Rules {
    allow_private: bool,
    operator_nets: Vec<IpNet>,
    policy: RwLock<(EgressPolicy, Parsed)>,
    /// Bumped by every policy change, so a cached check knows it is stale.
    generation: AtomicU64,
}

impl Rules {
    fn permits(&self, host: &str, address: IpAddr, named: bool) -> Result<(), DestinationRefused> {
        let address = canonical(address);
        let policy = self.policy.read().unwrap_or_else(|p| p.into_inner());
        let parsed = &policy.1;
        if self.operator_nets.iter().chain(&parsed.nets).any(|net| net.contains(&address)) {
            return Ok(());
        }
        if !is_public(address) && !self.allow_private {
            return Err(DestinationRefused::NonPublic { host: host.to_owned(), address });
        }
        if parsed.listed && !named {
            return Err(DestinationRefused::NotListed { host: host.to_owned() });
        }
        Ok(())
    }

    fn names(&self, host: &str) -> bool {
        let host = normal_name(host);
        let policy = self.policy.read().unwrap_or_else(|p| p.into_inner());
        policy.1.names.iter().any(|name| match name.strip_prefix("*.") {
            Some(suffix) => {
                host.len() > suffix.len() + 1 && host.ends_with(suffix) && {
                    let cut = host.len() - suffix.len();
                    host.as_bytes()[cut - 1] == b'.'
                }
            }
            None => *name == host,
        })
    }

    /// Checks a literal address without resolving anything.
    fn literal(&self, host: &str) -> Option<Result<IpAddr, DestinationRefused>> {
        literal(host).map(|address| self.permits(host, address, false).map(|()| address))
    }

    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, DestinationRefused> {
        if host.starts_with('/') {
            return Err(DestinationRefused::Socket(host.to_owned()));
        }
        if let Some(checked) = self.literal(host) {
            return checked.map(|address| vec![SocketAddr::new(address, port)]);
        }
        let named = self.names(host);
        let unresolved = |message: String| DestinationRefused::Unresolved { host: host.to_owned(), message };
        let addresses: Vec<SocketAddr> = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| unresolved(format!("no answer within {} s", RESOLVE_TIMEOUT.as_secs())))?
            .map_err(|error| unresolved(error.to_string()))?
            .collect();
        if addresses.is_empty() {
            return Err(unresolved("no address".into()));
        }
        for address in &addresses {
            self.permits(host, address.ip(), named)?;
        }
        Ok(addresses)
    }
}

/// One tenant's confinement: its policy, the operator's settings, and the
/// HTTP client its invocations use (whose resolver and redirect policy
/// apply the same rules). Cheap to clone; clones share one client.
#[derive(Clone, Debug)]
pub struct Confinement {
    rules: Arc<Rules>,
    /// Built on the first invocation: a client holds its own TLS roots
    /// (about 110 KB and a few milliseconds to load), and most tenants
    /// never invoke an HTTP binding, so building one per tenant at load
    /// made 10,000 tenants cost 1.1 GB and 40 s to start.
    /// A client that failed to build stays failed: invocations are
    /// refused, never sent through an unconfined default client.
    http: Arc<OnceLock<Result<reqwest::Client, String>>>,
}

/// The tenant client's resolver: resolves, then refuses the name unless
/// every address passes.
struct Resolver(Arc<Rules>);

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let rules = self.0.clone();
        Box::pin(async move {
            let addresses = rules.resolve(name.as_str(), 0).await?;
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

impl Confinement {
    /// A confinement under the operator's `settings` (`allow_private`
    /// unset counts as off), starting with an empty policy.
    pub fn new(settings: &EgressSettings) -> Confinement {
        crate::install_crypto_provider();
        let rules = Arc::new(Rules {
            allow_private: settings.allow_private.unwrap_or(false),
            operator_nets: settings.allow.iter().filter_map(|entry| parse_net(entry)).collect(),
            policy: RwLock::new((EgressPolicy::default(), Parsed::default())),
            generation: AtomicU64::new(0),
        });
        Confinement { rules, http: Arc::default() }
    }

    /// Replaces the tenant's policy.
    ///
    /// # Errors
    /// [`EgressPolicyError`] when it does not check; the old policy stays.
    pub fn set_policy(&self, policy: EgressPolicy) -> Result<(), EgressPolicyError> {
        let parsed = policy.parse()?;
        *self.rules.policy.write().unwrap_or_else(|p| p.into_inner()) = (policy, parsed);
        self.rules.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Changes with every [`Confinement::set_policy`]: a check remembered
    /// under an older generation must be made again.
    pub fn generation(&self) -> u64 {
        self.rules.generation.load(Ordering::SeqCst)
    }

    /// The tenant's policy.
    pub fn policy(&self) -> EgressPolicy {
        self.rules.policy.read().unwrap_or_else(|p| p.into_inner()).0.clone()
    }

    /// Resolves `host` (a name, an address, `[v6]`, or a socket path) and
    /// checks every address; the addresses, with `port`, when all pass.
    ///
    /// # Errors
    /// [`DestinationRefused`] saying which address broke which rule, or
    /// that the name does not resolve.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, DestinationRefused> {
        self.rules.resolve(host, port).await
    }

    /// Checks `url`'s host: resolved when it is a name.
    ///
    /// # Errors
    /// As [`Confinement::resolve`]; a URL without a host is refused as
    /// unresolvable.
    pub async fn check_url(&self, url: &reqwest::Url) -> Result<(), DestinationRefused> {
        let Some(host) = url.host_str() else {
            return Err(DestinationRefused::Unresolved { host: url.to_string(), message: "no host".into() });
        };
        self.resolve(host, url.port_or_known_default().unwrap_or(0)).await.map(drop)
    }

    /// Checks `url`'s host when it is a literal address (a name is checked
    /// by the HTTP client's resolver when it connects).
    ///
    /// # Errors
    /// [`DestinationRefused`] for a refused literal address.
    pub fn check_literal(&self, url: &reqwest::Url) -> Result<(), DestinationRefused> {
        match url.host_str().and_then(|host| self.rules.literal(host)) {
            Some(Err(refused)) => Err(refused),
            _ => Ok(()),
        }
    }

    /// Whether the tenant may subscribe to `filter` (its MQTT topic
    /// prefix, when set).
    pub fn permits_filter(&self, filter: &str) -> bool {
        let policy = self.rules.policy.read().unwrap_or_else(|p| p.into_inner());
        match &policy.1.mqtt_topic_prefix {
            None => true,
            Some(prefix) => {
                filter == prefix || filter.strip_prefix(prefix.as_str()).is_some_and(|rest| rest.starts_with('/'))
            }
        }
    }

    /// The HTTP client for the tenant's invocations (no proxy; every
    /// resolved address and every literal redirect target checked), built
    /// on first use.
    ///
    /// # Errors
    /// [`DestinationRefused::Unconfined`] when the client could not be
    /// built.
    pub fn http(&self) -> Result<&reqwest::Client, DestinationRefused> {
        self.http
            .get_or_init(|| confined_client(&self.rules).map_err(|error| error.to_string()))
            .as_ref()
            .map_err(|message| DestinationRefused::Unconfined(message.clone()))
    }
}

/// Idle connections a tenant's HTTP client keeps to one host.
const IDLE_CONNECTIONS_PER_HOST: usize = 8;

/// Seconds an idle connection of a tenant's HTTP client stays open.
const IDLE_CONNECTION_SECS: u64 = 15;

/// The tenant's HTTP client: no proxy, names checked by [`Resolver`],
/// literal redirect targets checked by the redirect policy.
fn confined_client(rules: &Arc<Rules>) -> Result<reqwest::Client, reqwest::Error> {
    let redirects = rules.clone();
    reqwest::Client::builder()
        .user_agent(concat!("pilotage/", env!("CARGO_PKG_VERSION")))
        // A proxy would resolve names where these rules cannot see.
        .no_proxy()
        .dns_resolver(Arc::new(Resolver(rules.clone())))
        // After a burst of waiting Runs, their connections do not stay:
        // at most `IDLE_CONNECTIONS_PER_HOST` idle ones per host, each
        // closed after `IDLE_CONNECTION_SECS` unused (the memory that
        // comes back, issue: "Runs that wait cost nothing").
        .pool_max_idle_per_host(IDLE_CONNECTIONS_PER_HOST)
        .pool_idle_timeout(std::time::Duration::from_secs(IDLE_CONNECTION_SECS))
        .redirect(reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 10 {
                return attempt.error("more than 10 redirects");
            }
            // A name is checked by the resolver; a literal address
            // bypasses it, so it is checked here.
            let refused = attempt.url().host_str().and_then(|host| redirects.literal(host)).and_then(Result::err);
            match refused {
                Some(refused) => attempt.error(refused),
                None => attempt.follow(),
            }
        }))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confinement(allow_private: bool, allow: &[&str]) -> Confinement {
        let confinement =
            Confinement::new(&EgressSettings { allow_private: Some(allow_private), ..EgressSettings::default() });
        confinement
            .set_policy(EgressPolicy {
                allow: allow.iter().map(|s| (*s).to_owned()).collect(),
                mqtt_topic_prefix: None,
            })
            .unwrap();
        confinement
    }

    #[test]
    fn special_ranges_are_not_public() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "192.0.2.1",
            "::",
            "::1",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "::127.0.0.1",
            "2001:db8::1",
            "2002:7f00:1::",
        ] {
            assert!(!is_public(refused.parse().unwrap()), "{refused}");
        }
        for public in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "64:ff9b::808:808"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn clones_share_one_client_and_a_client_that_failed_to_build_refuses_every_destination() {
        let tenant = confinement(false, &[]);
        let clone = tenant.clone();
        let built = tenant.http().expect("the confined client builds");
        assert!(std::ptr::eq(built, clone.http().expect("the clone has the client")), "clones share one client");

        // A build failure is kept, and refuses: never a default client without the checks.
        let failed = confinement(false, &[]);
        failed.http.set(Err("the TLS backend did not start".to_owned())).expect("not built yet");
        let refused = failed.clone().http().expect_err("a failed client refuses");
        assert!(matches!(refused, DestinationRefused::Unconfined(_)));
        assert!(refused.to_string().contains("could not be built: the TLS backend did not start"), "{refused}");
    }

    #[test]
    fn a_cidr_permits_what_is_otherwise_refused_and_a_list_confines_the_rest() {
        let open = confinement(false, &[]);
        assert!(matches!(open.rules.literal("127.0.0.1"), Some(Err(DestinationRefused::NonPublic { .. }))));
        assert!(matches!(open.rules.literal("[::ffff:127.0.0.1]"), Some(Err(DestinationRefused::NonPublic { .. }))));
        assert!(matches!(open.rules.literal("8.8.8.8"), Some(Ok(_))));
        let listed = confinement(false, &["127.0.0.0/8", "*.example.com", "db.example.org"]);
        assert!(matches!(listed.rules.literal("127.0.0.5"), Some(Ok(_))));
        assert!(matches!(listed.rules.literal("8.8.8.8"), Some(Err(DestinationRefused::NotListed { .. }))));
        assert!(listed.rules.names("a.example.com") && listed.rules.names("A.Example.COM."));
        assert!(!listed.rules.names("example.com") && !listed.rules.names("badexample.com"));
        assert!(listed.rules.names("db.example.org") && !listed.rules.names("x.db.example.org"));
        let private = confinement(true, &[]);
        assert!(matches!(private.rules.literal("10.0.0.1"), Some(Ok(_))));
        let private_listed = confinement(true, &["192.0.2.0/24"]);
        assert!(matches!(private_listed.rules.literal("10.0.0.1"), Some(Err(DestinationRefused::NotListed { .. }))));
    }

    #[test]
    fn policies_and_prefixes_are_checked() {
        let bad = EgressPolicy { allow: vec!["10.0.0.0/33".into()], mqtt_topic_prefix: None };
        assert!(matches!(bad.check(), Err(EgressPolicyError::Allow { index: 0, .. })));
        for prefix in ["", "$SYS", "a/#", "a/+/b", "a/"] {
            let policy = EgressPolicy { allow: vec![], mqtt_topic_prefix: Some(prefix.into()) };
            assert!(policy.check().is_err(), "{prefix}");
        }
        let confinement = confinement(false, &[]);
        assert!(confinement.permits_filter("#"));
        confinement.set_policy(EgressPolicy { allow: vec![], mqtt_topic_prefix: Some("tenants/acme".into()) }).unwrap();
        assert!(confinement.permits_filter("tenants/acme/#") && confinement.permits_filter("tenants/acme"));
        assert!(!confinement.permits_filter("#") && !confinement.permits_filter("tenants/acmex/#"));
        assert!(!confinement.permits_filter("tenants/+/x") && !confinement.permits_filter("+/acme"));
    }

    #[tokio::test]
    async fn names_are_checked_after_resolution_and_sockets_refused() {
        let open = confinement(false, &[]);
        // `localhost` resolves to loopback from the hosts file: refused
        // after resolution, though the name itself says nothing.
        assert!(matches!(open.resolve("localhost", 5432).await, Err(DestinationRefused::NonPublic { .. })));
        assert!(matches!(open.resolve("/var/run/postgresql", 5432).await, Err(DestinationRefused::Socket(_))));
        let loopback = confinement(false, &["127.0.0.0/8", "::1"]);
        assert!(loopback.resolve("localhost", 5432).await.is_ok());
    }
}
