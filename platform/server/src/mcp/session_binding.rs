//! Session binding and the session ceiling: each MCP session (Streamable
//! HTTP `Mcp-Session-Id`, Part III §8.1) belongs to the principal that
//! opened it, and a principal or tenant holds at most a set number of
//! sessions at once.
//!
//! [`SessionBindings`] is the whole interface: [`SessionBindings::reserve`]
//! takes a place for an `initialize` before the session exists (refusing
//! beyond the ceilings), [`Reservation::bind`] hands the place to the
//! session id once the session manager creates it,
//! [`SessionBindings::owner`] answers whose a session is (and counts it as
//! used), and [`SessionBindings::release`] ends the binding when the
//! session ends. Counts are live: a place is held from the reservation
//! until the session ends (DELETE, idle expiry, shutdown, eviction), or
//! until the reservation is dropped unbound (the `initialize` failed).
//!
//! At the ceiling, a new session does not lock its principal out: the
//! principal's least recently used session that is *idle* (no request in
//! flight, no open stream: [`SessionBindings::in_use`]) is evicted to make
//! room, and the caller closes it (its next use gets 404, which MCP clients
//! answer by initializing again, Streamable HTTP "Session Management").
//! Clients that never send DELETE (many do not) therefore cost nothing
//! beyond the ceiling. Only when every one of the principal's sessions is
//! busy is the `initialize` refused (429). Another principal's session is
//! never evicted: at the tenant ceiling the caller may evict only its own.
//!
//! The state is in this process. With replicas on one PostgreSQL, a
//! session's owner is also stored (`fleet::sessions`); a replica that is
//! asked for a session it does not hold [`SessionBindings::adopt`]s it when
//! the stored owner is the caller. Ceilings count the sessions each replica
//! holds (per replica, documented in the settings).
//!
//! Invariant: a session id is reachable only through its binding; the
//! HTTP edge answers an id bound to another principal, or bound to nobody,
//! exactly as an unknown id (`http/session_binding.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::tenancy::Principal;

/// Who a session belongs to: the tenant and subject of the principal that
/// opened it (Part III §8.4). Scopes are not part of it, so a principal
/// whose token is refreshed with other scopes keeps its sessions; the
/// tenant is the one the request acted in (the path's `/t/{tenant}/mcp`,
/// or the token's only tenant on `/mcp`), so a session opened in one tenant
/// is unknown in another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SessionOwner {
    /// The tenant.
    pub tenant: String,
    /// The issuer of the credential.
    pub issuer: String,
    /// The subject within the issuer.
    pub subject: String,
}

impl SessionOwner {
    /// The owner a request of `principal` acts as.
    pub(crate) fn of(principal: &Principal) -> SessionOwner {
        SessionOwner {
            tenant: principal.tenant.clone(),
            issuer: principal.issuer.clone(),
            subject: principal.subject.clone(),
        }
    }

    /// The principal within the tenant: issuer and subject (a subject is
    /// unique only within its issuer).
    fn principal(&self) -> (String, String) {
        (self.issuer.clone(), self.subject.clone())
    }
}

/// The ceilings: how many sessions may be open at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionCeilings {
    /// Per principal (tenant and subject). Setting
    /// `max_sessions_per_principal`, default 64.
    pub per_principal: usize,
    /// Per tenant, over all its principals. Setting
    /// `max_sessions_per_tenant`, default 1024.
    pub per_tenant: usize,
    /// The idle time after which a session ends (setting
    /// `session_idle_secs`), to tell a refused client when a place frees
    /// at the latest.
    pub idle: Duration,
}

/// Which ceiling refused a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CeilingScope {
    /// The principal's.
    Principal,
    /// The tenant's.
    Tenant,
}

impl CeilingScope {
    /// `principal` or `tenant`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CeilingScope::Principal => "principal",
            CeilingScope::Tenant => "tenant",
        }
    }
}

/// Why a session was not opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SessionBindingError {
    /// Occurs when the principal or its tenant already holds as many open
    /// sessions as its ceiling allows.
    #[error(
        "too many open MCP sessions: the {} ceiling of {limit} is reached and none of your sessions is idle (each has a request in flight or an open stream); end one (HTTP DELETE with its Mcp-Session-Id) or retry after a moment",
        .scope.as_str()
    )]
    CeilingReached {
        /// Which ceiling.
        scope: CeilingScope,
        /// Its value.
        limit: usize,
        /// When a place frees at the latest if the sessions held stay idle.
        retry_after: Duration,
    },
}

/// How a bound session is being used.
#[derive(Clone, Copy, Debug)]
struct Use {
    /// When a request for it last began or ended.
    last: Instant,
    /// Requests in flight and streams open ([`InUse`] guards alive).
    active: usize,
}

impl Use {
    fn now() -> Use {
        Use { last: Instant::now(), active: 0 }
    }
}

/// One subject's sessions in a tenant.
#[derive(Debug, Default)]
struct SubjectSessions {
    /// Places held: bound sessions and reservations.
    held: usize,
    /// Bound sessions and how each is used.
    sessions: HashMap<String, Use>,
}

impl SubjectSessions {
    /// The least recently used session with nothing in flight.
    fn idlest(&self) -> Option<String> {
        self.sessions
            .iter()
            .filter(|(_, used)| used.active == 0)
            .min_by_key(|(_, used)| used.last)
            .map(|(id, _)| id.clone())
    }
}

/// One tenant's sessions.
#[derive(Debug, Default)]
struct TenantSessions {
    /// Places held over all subjects.
    held: usize,
    subjects: HashMap<(String, String), SubjectSessions>,
}

#[derive(Debug, Default)]
struct State {
    owners: HashMap<String, SessionOwner>,
    tenants: HashMap<String, TenantSessions>,
}

impl State {
    fn use_of(&mut self, owner: &SessionOwner, session_id: &str) -> Option<&mut Use> {
        self.tenants.get_mut(&owner.tenant)?.subjects.get_mut(&owner.principal())?.sessions.get_mut(session_id)
    }

    /// Ends the binding of `session_id` and gives its place back; its
    /// owner, when it was bound.
    fn unbind(&mut self, session_id: &str) -> Option<SessionOwner> {
        let owner = self.owners.remove(session_id)?;
        if let Some(subject) =
            self.tenants.get_mut(&owner.tenant).and_then(|tenant| tenant.subjects.get_mut(&owner.principal()))
        {
            subject.sessions.remove(session_id);
        }
        self.give_back(&owner);
        Some(owner)
    }

    fn give_back(&mut self, owner: &SessionOwner) {
        if let Some(tenant) = self.tenants.get_mut(&owner.tenant) {
            tenant.held = tenant.held.saturating_sub(1);
            if let Some(subject) = tenant.subjects.get_mut(&owner.principal()) {
                subject.held = subject.held.saturating_sub(1);
                if subject.held == 0 {
                    tenant.subjects.remove(&owner.principal());
                }
            }
            if tenant.held == 0 {
                self.tenants.remove(&owner.tenant);
            }
        }
    }
}

#[derive(Debug)]
struct Shared {
    ceilings: SessionCeilings,
    state: Mutex<State>,
}

/// Which principal each session belongs to, and how many places each
/// principal and tenant holds. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub(crate) struct SessionBindings {
    shared: Arc<Shared>,
}

/// A place taken for a session about to be created. Dropped unbound, it
/// gives the place back.
#[derive(Debug)]
pub(crate) struct Reservation {
    shared: Arc<Shared>,
    owner: SessionOwner,
    armed: bool,
}

impl Reservation {
    /// Binds the place to `session_id`: the session is now `owner`'s until
    /// [`SessionBindings::release`].
    pub(crate) fn bind(mut self, session_id: &str) {
        self.armed = false;
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(subject) = state
            .tenants
            .get_mut(&self.owner.tenant)
            .and_then(|tenant| tenant.subjects.get_mut(&self.owner.principal()))
        {
            subject.sessions.insert(session_id.to_owned(), Use::now());
        }
        state.owners.insert(session_id.to_owned(), self.owner.clone());
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.armed {
            self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).give_back(&self.owner);
        }
    }
}

/// A place taken by [`SessionBindings::reserve`], and the session evicted
/// to make room for it, which the caller must close.
#[derive(Debug)]
pub(crate) struct Reserved {
    /// The place.
    pub reservation: Reservation,
    /// The principal's idle session whose binding ended to free the place
    /// (already unreachable; its transport is still to be closed).
    pub evicted: Option<String>,
}

/// One request in flight, or one open stream, of a session: while alive,
/// the session is not idle and is never evicted. Dropping it marks the
/// session used now.
#[derive(Debug)]
pub(crate) struct InUse {
    shared: Arc<Shared>,
    session_id: String,
    owner: SessionOwner,
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(used) = state.use_of(&self.owner, &self.session_id) {
            used.active = used.active.saturating_sub(1);
            used.last = Instant::now();
        }
    }
}

/// A reservation travelling with an `initialize` request (in its HTTP
/// request extensions) to the session manager, which binds it to the id it
/// creates. Clones share the one reservation; whoever takes it first gets
/// it.
#[derive(Clone, Debug)]
pub(crate) struct PendingSession(Arc<Mutex<Option<Reservation>>>);

impl PendingSession {
    /// Wraps `reservation`.
    pub(crate) fn new(reservation: Reservation) -> PendingSession {
        PendingSession(Arc::new(Mutex::new(Some(reservation))))
    }

    /// The reservation, once.
    pub(crate) fn take(&self) -> Option<Reservation> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl SessionBindings {
    /// No sessions yet, under `ceilings`.
    pub(crate) fn new(ceilings: SessionCeilings) -> SessionBindings {
        SessionBindings { shared: Arc::new(Shared { ceilings, state: Mutex::new(State::default()) }) }
    }

    /// Takes a place for a session of `owner`. At a ceiling, `owner`'s
    /// least recently used idle session (no [`InUse`] alive) is evicted to
    /// make room: its binding ends here, and the caller closes it.
    ///
    /// # Errors
    /// [`SessionBindingError::CeilingReached`] when `owner` or its tenant
    /// holds its ceiling's number of places and none of `owner`'s sessions
    /// is idle; nothing is taken.
    pub(crate) fn reserve(&self, owner: &SessionOwner) -> Result<Reserved, SessionBindingError> {
        let ceilings = self.shared.ceilings;
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let tenant = state.tenants.entry(owner.tenant.clone()).or_default();
        let subject = tenant.subjects.get(&owner.principal());
        let subject_held = subject.map_or(0, |subject| subject.held);
        let full = if subject_held >= ceilings.per_principal {
            Some((CeilingScope::Principal, ceilings.per_principal))
        } else if tenant.held >= ceilings.per_tenant {
            Some((CeilingScope::Tenant, ceilings.per_tenant))
        } else {
            None
        };
        let mut evicted = None;
        if let Some((scope, limit)) = full {
            match subject.and_then(SubjectSessions::idlest) {
                Some(idlest) => {
                    state.unbind(&idlest);
                    evicted = Some(idlest);
                }
                None => {
                    // The caller's own places are busy (a request or
                    // stream ends soon, a reservation binds or frees in
                    // moments); at the tenant ceiling without any of its
                    // own, a place frees when another's session idles out.
                    let retry_after = match scope {
                        CeilingScope::Tenant if subject_held == 0 => tenant
                            .subjects
                            .values()
                            .flat_map(|s| s.sessions.values())
                            .map(|used| used.last)
                            .min()
                            .map(|used| ceilings.idle.saturating_sub(used.elapsed())),
                        _ => None,
                    }
                    .unwrap_or(Duration::from_secs(1))
                    .max(Duration::from_secs(1));
                    if tenant.held == 0 {
                        state.tenants.remove(&owner.tenant);
                    }
                    return Err(SessionBindingError::CeilingReached { scope, limit, retry_after });
                }
            }
        }
        let tenant = state.tenants.entry(owner.tenant.clone()).or_default();
        tenant.held += 1;
        tenant.subjects.entry(owner.principal()).or_default().held += 1;
        Ok(Reserved {
            reservation: Reservation { shared: self.shared.clone(), owner: owner.clone(), armed: true },
            evicted,
        })
    }

    /// Marks `session_id` in use by `owner` while the guard lives (a request
    /// in flight, an open stream); `None` when it is not bound to `owner`.
    pub(crate) fn in_use(&self, session_id: &str, owner: &SessionOwner) -> Option<InUse> {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.owners.get(session_id) != Some(owner) {
            return None;
        }
        let used = state.use_of(owner, session_id)?;
        used.active += 1;
        used.last = Instant::now();
        Some(InUse { shared: self.shared.clone(), session_id: session_id.to_owned(), owner: owner.clone() })
    }

    /// Whose session `session_id` is, marking it used now; `None` when no
    /// principal holds it (unknown, ended, or never bound).
    pub(crate) fn owner(&self, session_id: &str) -> Option<SessionOwner> {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let owner = state.owners.get(session_id)?.clone();
        if let Some(used) = state.use_of(&owner, session_id) {
            used.last = Instant::now();
        }
        Some(owner)
    }

    /// Binds `session_id`, opened by `owner` on another replica, here too
    /// (`fleet::sessions`): it takes a place without a ceiling check, since
    /// the session exists already and refusing it would end it for its
    /// client. Ceilings are per replica.
    pub(crate) fn adopt(&self, session_id: &str, owner: &SessionOwner) {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.owners.contains_key(session_id) {
            return;
        }
        let tenant = state.tenants.entry(owner.tenant.clone()).or_default();
        tenant.held += 1;
        let subject = tenant.subjects.entry(owner.principal()).or_default();
        subject.held += 1;
        subject.sessions.insert(session_id.to_owned(), Use::now());
        state.owners.insert(session_id.to_owned(), owner.clone());
    }

    /// Ends the binding of `session_id` and gives its place back (the
    /// session ended). Unknown ids are ignored.
    pub(crate) fn release(&self, session_id: &str) {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).unbind(session_id);
    }

    /// Places `owner` holds now (bound sessions and reservations).
    #[cfg(test)]
    pub(crate) fn held_by(&self, owner: &SessionOwner) -> usize {
        let state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.tenants.get(&owner.tenant).and_then(|t| t.subjects.get(&owner.principal())).map_or(0, |s| s.held)
    }

    /// Places `tenant` holds now.
    #[cfg(test)]
    pub(crate) fn held_in(&self, tenant: &str) -> usize {
        let state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.tenants.get(tenant).map_or(0, |t| t.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(tenant: &str, subject: &str) -> SessionOwner {
        SessionOwner { tenant: tenant.into(), issuer: "https://issuer.example".into(), subject: subject.into() }
    }

    fn bindings(per_principal: usize, per_tenant: usize) -> SessionBindings {
        SessionBindings::new(SessionCeilings { per_principal, per_tenant, idle: Duration::from_secs(1800) })
    }

    #[test]
    fn a_bound_session_answers_its_owner_and_ends_with_release() {
        let bindings = bindings(2, 4);
        let alice = owner("a", "alice");
        bindings.reserve(&alice).unwrap().reservation.bind("s1");
        assert_eq!(bindings.owner("s1"), Some(alice.clone()));
        assert_eq!(bindings.owner("s2"), None);
        assert_eq!(bindings.held_by(&alice), 1);
        bindings.release("s1");
        assert_eq!(bindings.owner("s1"), None);
        assert_eq!(bindings.held_by(&alice), 0);
        assert_eq!(bindings.held_in("a"), 0);
        // Releasing twice (rmcp closes a deleted session twice) is harmless.
        bindings.release("s1");
        assert_eq!(bindings.held_in("a"), 0);
    }

    #[test]
    fn at_the_principal_ceiling_the_least_recently_used_idle_session_is_evicted() {
        let bindings = bindings(2, 10);
        let alice = owner("a", "alice");
        bindings.reserve(&alice).unwrap().reservation.bind("s1");
        std::thread::sleep(Duration::from_millis(2));
        bindings.reserve(&alice).unwrap().reservation.bind("s2");
        // s1 was used after s2 was opened: s2 is now the least recent.
        std::thread::sleep(Duration::from_millis(2));
        drop(bindings.in_use("s1", &alice).unwrap());
        let third = bindings.reserve(&alice).unwrap();
        assert_eq!(third.evicted.as_deref(), Some("s2"));
        assert_eq!(bindings.owner("s2"), None, "the evicted session is unreachable");
        third.reservation.bind("s3");
        assert_eq!(bindings.held_by(&alice), 2);
        // Another subject of the same tenant is neither held back nor
        // evicted from.
        assert!(bindings.reserve(&owner("a", "bob")).unwrap().evicted.is_none());
    }

    #[test]
    fn a_session_in_use_is_never_evicted() {
        let bindings = bindings(2, 10);
        let alice = owner("a", "alice");
        bindings.reserve(&alice).unwrap().reservation.bind("s1");
        bindings.reserve(&alice).unwrap().reservation.bind("s2");
        let request = bindings.in_use("s1", &alice).unwrap();
        let stream = bindings.in_use("s2", &alice).unwrap();
        assert!(bindings.in_use("s1", &owner("a", "bob")).is_none(), "only the owner uses a session");
        let refused = bindings.reserve(&alice).unwrap_err();
        let SessionBindingError::CeilingReached { scope, limit, retry_after } = refused;
        assert_eq!((scope, limit, retry_after), (CeilingScope::Principal, 2, Duration::from_secs(1)));
        // A reservation in flight is busy too.
        drop(request);
        let pending = bindings.reserve(&alice).unwrap();
        assert_eq!(pending.evicted.as_deref(), Some("s1"));
        assert!(bindings.reserve(&alice).is_err(), "s2 streams and the reservation is in flight");
        drop(stream);
        std::thread::sleep(Duration::from_millis(2));
        pending.reservation.bind("s3");
        assert_eq!(bindings.reserve(&alice).unwrap().evicted.as_deref(), Some("s2"));
    }

    #[test]
    fn the_tenant_ceiling_evicts_only_the_callers_own_sessions() {
        let bindings = bindings(2, 3);
        bindings.reserve(&owner("a", "alice")).unwrap().reservation.bind("s1");
        bindings.reserve(&owner("a", "alice")).unwrap().reservation.bind("s2");
        bindings.reserve(&owner("a", "bob")).unwrap().reservation.bind("s3");
        // Carol holds nothing: she waits for another's session to idle out.
        let refused = bindings.reserve(&owner("a", "carol")).unwrap_err();
        let SessionBindingError::CeilingReached { scope, limit, retry_after } = refused;
        assert_eq!((scope, limit), (CeilingScope::Tenant, 3));
        assert!(retry_after > Duration::from_secs(1700) && retry_after <= Duration::from_secs(1800));
        // Bob evicts his own idle session, not Alice's.
        assert_eq!(bindings.reserve(&owner("a", "bob")).unwrap().evicted.as_deref(), Some("s3"));
        assert_eq!(bindings.owner("s1"), Some(owner("a", "alice")));
        // Another tenant is not held back.
        bindings.reserve(&owner("b", "carol")).unwrap().reservation.bind("s4");
        bindings.release("s1");
        bindings.reserve(&owner("a", "carol")).unwrap().reservation.bind("s5");
        assert_eq!(bindings.held_in("b"), 1);
    }
}
