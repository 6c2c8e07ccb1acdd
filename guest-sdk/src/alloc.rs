//! An allocator for Language components: a bump arena in the component's
//! initial memory, then talc over memory obtained with `memory.grow` in
//! large steps.
//!
//! Why: the platform runs every call in a fresh instance and discards it
//! afterwards, so memory a call frees is rarely worth reusing. The
//! standard library's allocator (dlmalloc) starts empty and grows linear
//! memory in 64 KiB steps; each `memory.grow` is a host call that changes
//! page protections, and the host undoes it when the instance is released.
//! Measured on a 10-step workflow validation, those growths cost more wall
//! time than the Language's own work, and a general-purpose allocator's
//! bookkeeping (bins, headers, coalescing) was the largest single item of
//! the Language's own time.
//!
//! So a call first allocates by bumping a pointer through an arena placed
//! in the initial memory (zero-filled, so it adds nothing to the
//! component's size): an allocation is an alignment and an addition, the
//! most recent allocation can grow or shrink in place (a growing vector
//! usually is the most recent one), and freeing it gives its bytes back;
//! any other free in the arena is ignored. A call that outruns the arena
//! (a long run, a very large program) continues on talc, which reuses what
//! is freed, over memory grown in steps of [`GROW_STEP_BYTES`], so the
//! host's memory bound still applies and at most [`ARENA_BYTES`] are ever
//! left unreused.
//!
//! A Language opts in with one line at its crate root:
//!
//! ```text
//! pilotage_guest_sdk::use_language_allocator!();
//! ```

/// Bytes of the arena in the initial memory. A validation of a 10-step
/// workflow allocates about 100 KiB. Kept small because the arena is part
/// of every instance's accessible memory, which the host scans for dirtied
/// pages and resets after each call: 2 MiB made that scan cost more.
pub const ARENA_BYTES: usize = 512 << 10;

/// Bytes by which memory grows once the arena is used up (at least what the
/// failed request needs).
pub const GROW_STEP_BYTES: usize = 1 << 20;

/// A bump arena over the addresses `[start, end)`: the arithmetic of the
/// allocator, kept free of raw memory so it is tested natively. The
/// component's allocator counts addresses from the arena's start, so its
/// arena is a constant (`Bump::new(0, ARENA_BYTES)`) in the initial image
/// and an allocation reads no "not yet set up" flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bump {
    /// The first address not handed out.
    next: usize,
    /// The end of the arena.
    end: usize,
    /// The start of the most recent live allocation, which may be resized
    /// in place or given back; [`Bump::NONE`] when there is none. (A plain
    /// word rather than an `Option`: the allocator copies this struct on
    /// every call.)
    last: usize,
}

impl Bump {
    /// `last` when no allocation may be resized or given back (no
    /// allocation can start at the highest address).
    const NONE: usize = usize::MAX;

    /// An empty arena over `[start, start + bytes)`.
    pub const fn new(start: usize, bytes: usize) -> Bump {
        Bump { next: start, end: start + bytes, last: Bump::NONE }
    }

    /// The address of `size` bytes aligned to `align` (a power of two), or
    /// `None` when the arena cannot hold them.
    #[inline]
    pub fn allocate(&mut self, size: usize, align: usize) -> Option<usize> {
        let at = self.next.checked_add(align - 1)? & !(align - 1);
        let end = at.checked_add(size)?;
        if end > self.end {
            return None;
        }
        self.next = end;
        self.last = at;
        Some(at)
    }

    /// Resizes the allocation at `address` to `new_size` in place when it
    /// is the most recent one and the arena has room; `false` otherwise
    /// (the caller moves it).
    #[inline]
    pub fn resize_in_place(&mut self, address: usize, new_size: usize) -> bool {
        if self.last != address {
            return false;
        }
        match address.checked_add(new_size) {
            Some(end) if end <= self.end => {
                self.next = end;
                true
            }
            _ => false,
        }
    }

    /// Gives back the allocation at `address` when it is the most recent
    /// one; any other is left in place until the instance is discarded.
    #[inline]
    pub fn free(&mut self, address: usize) {
        if self.last == address {
            self.next = address;
            self.last = Bump::NONE;
        }
    }
}

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
pub use wasm::{LanguageAllocator, language_allocator};

#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[allow(unsafe_code)] // an allocator hands out raw memory
mod wasm {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::Cell;
    use core::mem::MaybeUninit;
    use core::ptr::NonNull;

    use talc::base::Talc;
    use talc::base::binning::Binning;
    use talc::cell::TalcSyncCell;
    use talc::source::Source;
    use talc::wasm::WasmBinning;

    use super::{ARENA_BYTES, Bump, GROW_STEP_BYTES};

    const PAGE_BYTES: usize = 64 << 10;

    /// The arena's alignment. The bump aligns offsets from the arena's
    /// start, which is this aligned; a request aligned more goes to talc.
    const ARENA_ALIGN: usize = 4096;

    /// The arena's memory, aligned to [`ARENA_ALIGN`].
    #[repr(C, align(4096))]
    struct Arena([MaybeUninit<u8>; ARENA_BYTES]);

    // `align` takes a literal: keep it and the constant in step.
    const _: () = assert!(core::mem::align_of::<Arena>() == ARENA_ALIGN);

    /// The arena: zero-initialised static memory (`.bss`), so it is part of
    /// the initial linear memory without being stored in the component.
    static mut ARENA: Arena = Arena([MaybeUninit::uninit(); ARENA_BYTES]);

    /// Where talc's memory comes from: `memory.grow` only (the arena is the
    /// bump allocator's).
    #[derive(Debug, Default)]
    pub struct Grow {
        /// The end of the heap talc last claimed or extended, to extend it
        /// when the next growth is contiguous.
        grown_end: Option<NonNull<u8>>,
    }

    // SAFETY: `acquire` only touches the allocator through the `talc` it is
    // given and claims only pages `memory.grow` just added, which nothing
    // else owns.
    unsafe impl Source for Grow {
        fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
            // Room for the request, talc's chunk metadata and alignment.
            let needed = layout.size().saturating_add(layout.align()).saturating_add(256);
            let bytes = needed.max(GROW_STEP_BYTES).div_ceil(PAGE_BYTES) * PAGE_BYTES;
            let previous_pages = match core::arch::wasm32::memory_grow(0, bytes / PAGE_BYTES) {
                usize::MAX => return Err(()),
                previous => previous,
            };
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

    /// The allocator [`use_language_allocator!`](crate::use_language_allocator)
    /// installs: the bump arena, then talc.
    pub struct LanguageAllocator {
        /// Offsets into `ARENA` (from 0), so the empty arena is a constant.
        bump: Cell<Bump>,
        talc: TalcSyncCell<Grow, WasmBinning>,
    }

    // SAFETY: compiled only for WebAssembly without threads: one thread
    // ever touches the allocator.
    unsafe impl Sync for LanguageAllocator {}

    /// A new allocator (for the `#[global_allocator]` static).
    pub const fn language_allocator() -> LanguageAllocator {
        LanguageAllocator {
            bump: Cell::new(Bump::new(0, ARENA_BYTES)),
            talc: TalcSyncCell::new_wasm(Grow { grown_end: None }),
        }
    }

    impl LanguageAllocator {
        /// Runs `f` on the bump state and stores the result back.
        #[inline]
        fn with_bump<R>(&self, f: impl FnOnce(&mut Bump) -> R) -> R {
            let mut bump = self.bump.get();
            let result = f(&mut bump);
            self.bump.set(bump);
            result
        }

        /// The offset of `ptr` in the arena, when it points into it.
        #[inline]
        fn arena_offset(ptr: *mut u8) -> Option<usize> {
            let offset = ptr.addr().wrapping_sub((&raw const ARENA).addr());
            (offset < ARENA_BYTES).then_some(offset)
        }

        /// The arena's memory at `offset` (an offset the bump handed out).
        #[inline]
        fn arena_ptr(offset: usize) -> *mut u8 {
            (&raw mut ARENA).cast::<u8>().wrapping_add(offset)
        }
    }

    // SAFETY: arena offsets come from `Bump`, which hands out disjoint
    // ranges inside `ARENA` (nothing else references it), aligned from its
    // start; the start is `ARENA_ALIGN`-aligned and more aligned requests go
    // to talc. Every other pointer is talc's and goes back to talc.
    unsafe impl GlobalAlloc for LanguageAllocator {
        #[inline]
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let bumped = if layout.align() <= ARENA_ALIGN {
                self.with_bump(|bump| bump.allocate(layout.size(), layout.align()))
            } else {
                None
            };
            match bumped {
                Some(offset) => Self::arena_ptr(offset),
                // SAFETY: the caller's contract for `alloc`.
                None => unsafe { self.talc.alloc(layout) },
            }
        }

        #[inline]
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            match Self::arena_offset(ptr) {
                Some(offset) => self.with_bump(|bump| bump.free(offset)),
                // SAFETY: a pointer outside the arena came from talc.
                None => unsafe { self.talc.dealloc(ptr, layout) },
            }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let Some(offset) = Self::arena_offset(ptr) else {
                // SAFETY: a pointer outside the arena came from talc.
                return unsafe { self.talc.realloc(ptr, layout, new_size) };
            };
            if self.with_bump(|bump| bump.resize_in_place(offset, new_size)) {
                return ptr;
            }
            // SAFETY: `layout.align()` is valid and `new_size` is the
            // caller's; the old block stays valid until copied.
            let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            // SAFETY: as for `alloc`.
            let moved = unsafe { self.alloc(new_layout) };
            if !moved.is_null() {
                // SAFETY: both blocks are live, distinct, and at least
                // `min(old, new)` bytes long.
                unsafe { core::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size)) };
                // SAFETY: `ptr` is the caller's live arena block.
                unsafe { self.dealloc(ptr, layout) };
            }
            moved
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_bounded() {
        let mut bump = Bump::new(1001, 100);
        let a = bump.allocate(10, 8).unwrap();
        assert_eq!(a, 1008);
        let b = bump.allocate(1, 1).unwrap();
        assert_eq!(b, 1018);
        let c = bump.allocate(4, 16).unwrap();
        assert_eq!(c % 16, 0);
        assert!(c >= 1019);
        assert!(bump.allocate(100, 1).is_none(), "beyond the arena");
        assert!(bump.allocate(usize::MAX, 1).is_none(), "no overflow");
    }

    #[test]
    fn only_the_latest_allocation_grows_in_place_or_comes_back() {
        let mut bump = Bump::new(0, 64);
        let a = bump.allocate(8, 8).unwrap();
        assert!(bump.resize_in_place(a, 32), "the latest grows in place");
        let b = bump.allocate(8, 8).unwrap();
        assert_eq!(b, 32);
        assert!(!bump.resize_in_place(a, 40), "an older one must move");
        assert!(!bump.resize_in_place(b, 33), "not beyond the arena");
        bump.free(a);
        assert_eq!(bump.allocate(8, 8), Some(40), "freeing an older one gives nothing back");
        bump.free(40);
        assert_eq!(bump.allocate(8, 8), Some(40), "freeing the latest does");
    }
}
