//! An allocator for Language components: talc, fed first from an arena in
//! the component's initial memory, then from `memory.grow` in large steps.
//!
//! Why: the platform runs every call in a fresh instance. The standard
//! library's allocator (dlmalloc) starts empty and grows linear memory in
//! 64 KiB steps; each `memory.grow` is a host call that changes page
//! protections (a system call and a TLB shootdown), and the host undoes it
//! when the instance is released. Measured on a 10-step workflow
//! validation, those growths cost more wall time than the Language's own
//! work. An arena placed in the initial memory (zero-filled, so it adds
//! nothing to the component's size) serves a typical call without growing
//! at all; a call that needs more grows in steps of [`GROW_STEP_BYTES`], so
//! the host's memory bound still applies.
//!
//! A Language opts in with one line at its crate root:
//!
//! ```text
//! pilotage_guest_sdk::use_language_allocator!();
//! ```

#![allow(unsafe_code)] // an allocator hands out raw memory

use core::alloc::Layout;
use core::mem::MaybeUninit;
use core::ptr::NonNull;

use talc::base::Talc;
use talc::base::binning::Binning;
use talc::cell::TalcSyncCell;
use talc::source::Source;
use talc::wasm::WasmBinning;

/// Bytes of the arena in the initial memory.
pub const ARENA_BYTES: usize = 2 << 20;

/// Bytes by which memory grows once the arena is used up (at least what the
/// failed request needs).
pub const GROW_STEP_BYTES: usize = 1 << 20;

const PAGE_BYTES: usize = 64 << 10;

/// The arena: zero-initialised static memory (`.bss`), so it is part of the
/// initial linear memory without being stored in the component.
static mut ARENA: [MaybeUninit<u8>; ARENA_BYTES] = [MaybeUninit::uninit(); ARENA_BYTES];

/// Where talc's memory comes from: the arena once, then `memory.grow`.
#[derive(Debug, Default)]
pub struct ArenaThenGrow {
    arena_claimed: bool,
    /// The end of the heap talc last claimed or extended from growth, to
    /// extend it when the next growth is contiguous.
    grown_end: Option<NonNull<u8>>,
}

impl ArenaThenGrow {
    /// The source before any memory is claimed.
    pub const fn new() -> Self {
        ArenaThenGrow { arena_claimed: false, grown_end: None }
    }
}

// SAFETY: `acquire` only touches the allocator through the `talc` it is
// given, claims the arena exactly once (nothing else references `ARENA`),
// and claims grown memory only from pages `memory.grow` just added, which
// nothing else owns.
unsafe impl Source for ArenaThenGrow {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        if !talc.source.arena_claimed {
            talc.source.arena_claimed = true;
            let base = (&raw mut ARENA).cast::<u8>();
            // SAFETY: the arena is static, unused by anything else, and
            // claimed once.
            if unsafe { talc.claim(base, ARENA_BYTES) }.is_some() {
                return Ok(());
            }
        }
        // Room for the request, talc's chunk metadata and alignment.
        let needed = layout.size().saturating_add(layout.align()).saturating_add(256);
        let bytes = needed.max(GROW_STEP_BYTES).div_ceil(PAGE_BYTES) * PAGE_BYTES;
        let previous_pages = grow(bytes / PAGE_BYTES).ok_or(())?;
        let base = (previous_pages * PAGE_BYTES) as *mut u8;
        let end = base.wrapping_add(bytes);
        if let Some(old_end) = talc.source.grown_end.take()
            && old_end.as_ptr() == base
        {
            // SAFETY: `old_end` ends a heap talc owns and the pages from
            // there to `end` were just added by `memory.grow`.
            talc.source.grown_end = Some(unsafe { talc.extend(old_end, end) });
            return Ok(());
        }
        // SAFETY: the pages `[base, end)` were just added by `memory.grow`.
        talc.source.grown_end = unsafe { talc.claim(base, bytes) };
        if talc.source.grown_end.is_some() { Ok(()) } else { Err(()) }
    }
}

#[cfg(target_arch = "wasm32")]
fn grow(pages: usize) -> Option<usize> {
    match core::arch::wasm32::memory_grow(0, pages) {
        usize::MAX => None,
        previous => Some(previous),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn grow(_pages: usize) -> Option<usize> {
    None
}

/// The allocator type [`use_language_allocator!`](crate::use_language_allocator) installs.
pub type LanguageAllocator = TalcSyncCell<ArenaThenGrow, WasmBinning>;

/// A new allocator (for the `#[global_allocator]` static).
pub const fn language_allocator() -> LanguageAllocator {
    TalcSyncCell::new_wasm(ArenaThenGrow::new())
}
