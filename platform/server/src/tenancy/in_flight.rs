//! Tool calls in progress and whether the server is draining, for a
//! graceful shutdown and `/readyz`.

/// Tool calls in progress, so a shutdown can let them finish before it
/// closes the sessions their answers travel on; and whether the platform is
/// draining (`/readyz` then says so, so balancers stop sending work).
#[derive(Debug, Default)]
pub struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    draining: std::sync::atomic::AtomicBool,
    idle: tokio::sync::Notify,
}

/// Counts one tool call until dropped.
#[derive(Debug)]
pub struct InFlightGuard<'a> {
    owner: &'a InFlight,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.owner.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
            self.owner.idle.notify_waiters();
        }
    }
}

impl InFlight {
    /// Counts a tool call until the guard is dropped.
    pub fn enter(&self) -> InFlightGuard<'_> {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlightGuard { owner: self }
    }

    /// Tool calls in progress.
    pub fn count(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Marks the platform as draining.
    pub fn start_draining(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a shutdown is under way.
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Resolves when no tool call is in progress.
    pub async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}
