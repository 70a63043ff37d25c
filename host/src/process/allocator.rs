//! The operator's global allocator: mimalloc, except for buffers of `BIG` bytes or more, which
//! get a mapping of their own, unmapped when they are freed.
//!
//! The big allocations the operator makes are a module's bytes (18 MiB for a CPython
//! component) and the compiled code read back from the cache (36 MiB), on tokio's blocking
//! threads, each dropped on another thread than the one that made it. mimalloc frees a block
//! dropped by another thread only when the thread that allocated it next collects that page,
//! and a blocking thread that read a file may never: an operator idle with the Python rules
//! kept the module's freed 18 MiB resident (issue 38: 56 MiB VmRSS idle, 23.5 of it mimalloc's
//! heap, the module file's bytes found in it), whatever `mi_collect` and the arena purge
//! setting (memory.rs) did. A mapping of its own goes back to the system at its free, on any
//! thread. Big buffers are rare (a load, a swap, a module file read), so a system call each
//! costs nothing measurable; every smaller allocation is mimalloc's.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;

/// Buffers this big or bigger are mapped on their own. Well above anything a reconcile
/// allocates (a watch event, a request, the guest's input and plan: kilobytes).
pub const BIG: usize = 4 << 20;

/// mmap's alignment: a big allocation asking for more goes to mimalloc.
const PAGE: usize = 4096;

pub struct OperatorAllocator;

fn is_big(size: usize, align: usize) -> bool {
    cfg!(target_os = "linux") && size >= BIG && align <= PAGE
}

#[cfg(target_os = "linux")]
fn map(size: usize) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p.cast() }
}

#[cfg(target_os = "linux")]
fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: `ptr` and `size` are a mapping `map` made (or `mremap` moved), freed once.
    unsafe { libc::munmap(ptr.cast(), size) };
}

#[cfg(target_os = "linux")]
fn remap(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
    // SAFETY: `ptr` and `old` are a mapping `map` made; the kernel moves it if it must.
    let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
    if p == libc::MAP_FAILED { std::ptr::null_mut() } else { p.cast() }
}

#[cfg(not(target_os = "linux"))]
fn map(_: usize) -> *mut u8 {
    unreachable!("is_big is false off Linux")
}
#[cfg(not(target_os = "linux"))]
fn unmap(_: *mut u8, _: usize) {
    unreachable!("is_big is false off Linux")
}
#[cfg(not(target_os = "linux"))]
fn remap(_: *mut u8, _: usize, _: usize) -> *mut u8 {
    unreachable!("is_big is false off Linux")
}

// SAFETY: every block is allocated and freed by the same side (a size decides which, and a
// block keeps its size's side: `realloc` moves a block that crosses `BIG`); mmap returns
// page-aligned, zeroed memory, which meets any alignment up to `PAGE` and `alloc_zeroed`.
unsafe impl GlobalAlloc for OperatorAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_big(layout.size(), layout.align()) {
            return map(layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_big(layout.size(), layout.align()) {
            return map(layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_big(layout.size(), layout.align()) {
            return unmap(ptr, layout.size());
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (is_big(layout.size(), layout.align()), is_big(new_size, layout.align())) {
            // SAFETY: the caller's contract, passed on.
            (false, false) => unsafe { MiMalloc.realloc(ptr, layout, new_size) },
            (true, true) => remap(ptr, layout.size(), new_size),
            _ => {
                // SAFETY: `new_size` with the old alignment is a valid layout (the caller's
                // contract); the old block is copied up to the smaller size, then freed.
                unsafe {
                    let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    new
                }
            }
        }
    }
}
