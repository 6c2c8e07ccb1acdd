//! The demo: the demo tenant a server sets up when `Settings::demo` is on
//! ([`tenant`]) and the demo capability service its catalog is bound to
//! ([`world`]: profiles, orders, an outbox, and a small home whose hub
//! reports the front door as signed webhook deliveries).

pub mod tenant;
pub mod world;
