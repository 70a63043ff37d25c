//! A bump allocator that never frees. Every call runs in a fresh instance that is thrown
//! away afterwards, so freeing would only cost time; the host's memory cap bounds the total.
//!
//! It starts at `__heap_base`, inside the initial memory (sized in the Makefile for a typical
//! call), and grows the memory only beyond it: a typical call then never runs `memory.grow`,
//! which the host pays for with an mprotect to grow and another to reset the pool slot.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::Cell;

const PAGE: usize = 64 << 10;

unsafe extern "C" {
    /// Set by the linker: the first byte after the stack and the static data.
    static __heap_base: u8;
}

pub struct BumpAllocator {
    /// The next free byte.
    next: Cell<usize>,
    /// The end of the memory as this allocator last saw it; 0 before the first allocation,
    /// so that the first one takes the slow path, which starts the heap.
    end: Cell<usize>,
}

// SAFETY: wasm32-unknown-unknown without the atomics feature has a single thread.
unsafe impl Sync for BumpAllocator {}

impl BumpAllocator {
    pub const fn new() -> Self {
        BumpAllocator { next: Cell::new(0), end: Cell::new(0) }
    }

    #[cold]
    #[inline(never)]
    fn alloc_slow(&self, layout: Layout) -> *mut u8 {
        if self.end.get() == 0 {
            // The first allocation: the heap is what the initial memory has after the data.
            self.next.set(&raw const __heap_base as usize);
            self.end.set(wasm32::memory_size(0) * PAGE);
            // SAFETY: the caller's `Layout` contract, passed on.
            return unsafe { self.alloc(layout) };
        }
        let start = self.next.get().next_multiple_of(layout.align());
        let Some(new_next) = start.checked_add(layout.size()) else {
            return core::ptr::null_mut();
        };
        let pages = (new_next - self.end.get()).div_ceil(PAGE);
        if wasm32::memory_grow(0, pages) == usize::MAX {
            return core::ptr::null_mut();
        }
        self.end.set(self.end.get() + pages * PAGE);
        self.next.set(new_next);
        start as *mut u8
    }
}

unsafe impl GlobalAlloc for BumpAllocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Alignments are powers of two and `next` is far below `usize::MAX`; a `size` large
        // enough to wrap around goes to the slow path, which refuses it.
        let start = (self.next.get() + layout.align() - 1) & !(layout.align() - 1);
        let new_next = start.wrapping_add(layout.size());
        if new_next < start || new_next > self.end.get() {
            return self.alloc_slow(layout);
        }
        self.next.set(new_next);
        start as *mut u8
    }

    #[inline]
    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}
