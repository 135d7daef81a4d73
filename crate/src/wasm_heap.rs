//! The global allocator on wasm32: std's own (dlmalloc), over a system layer that grows the
//! wasm memory geometrically.
//!
//! std's dlmalloc asks `memory.grow` for the few pages each new request needs. A large
//! plan (a 1,000-layer RevGNN, BERT-Large) climbs to hundreds of MiB that way in thousands
//! of steps, and V8 counts every grow as new external memory: it ran about 60 full garbage
//! collections during one 1,000-layer analysis, about a fifth of its time. Here the heap
//! grows by at least an eighth of the memory it has (and at least 4 MiB), as a `Vec`
//! grows, so the same climb takes a few dozen grows. Memory beyond what dlmalloc uses is at
//! most that eighth. Where that much cannot be had (near the 4 GiB limit of wasm32), the
//! exact request is tried before failing, as std's layer does.
//!
//! The memory the linker leaves between the data and the initial memory's end
//! (`__heap_base..__heap_end`) is handed to dlmalloc first, as std does. wasm32 without the
//! `atomics` feature is single-threaded, so the allocator needs no lock.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::UnsafeCell;
use core::ptr;
use dlmalloc::{Allocator, Dlmalloc};

const PAGE: usize = 64 * 1024;
/// The least a grow adds.
const MIN_GROW: usize = 4 << 20;

extern "C" {
    static __heap_base: u8;
    static __heap_end: u8;
}

/// dlmalloc's system layer: fresh memory from `memory.grow`, never released (wasm memory
/// cannot shrink).
struct GrowingMemory {
    linker_chunk_used: UnsafeCell<bool>,
}

// SAFETY: wasm32 without atomics has one thread.
unsafe impl Send for GrowingMemory {}

impl GrowingMemory {
    /// `pages` more pages: the base address of the new ones, or `None`.
    fn grow(pages: usize) -> Option<usize> {
        let prev = wasm32::memory_grow(0, pages);
        (prev != usize::MAX).then(|| prev * PAGE)
    }
}

unsafe impl Allocator for GrowingMemory {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        // SAFETY: one thread; the flag is only read and written here.
        let used = unsafe { &mut *self.linker_chunk_used.get() };
        if size != 0 && !*used {
            *used = true;
            // SAFETY: the linker defines both symbols; only their addresses are read.
            let (base, end) = unsafe { (&__heap_base as *const u8 as usize, &__heap_end as *const u8 as usize) };
            if base != 0 && end > base && end - base >= size {
                return (base as *mut u8, end - base, 0);
            }
        }
        let need = size.div_ceil(PAGE);
        let have = wasm32::memory_size(0) * PAGE;
        let wanted = need.max((have / 8).max(MIN_GROW).div_ceil(PAGE));
        let Some((base, pages)) =
            Self::grow(wanted).map(|b| (b, wanted)).or_else(|| Self::grow(need).map(|b| (b, need)))
        else {
            return (ptr::null_mut(), 0, 0);
        };
        let bytes = pages * PAGE;
        // The last bytes of the address space are left out, as std does: a pointer past the
        // end must not wrap to 0.
        if base.wrapping_add(bytes) == 0 {
            return (base as *mut u8, bytes - 16, 0);
        }
        (base as *mut u8, bytes, 0)
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        ptr::null_mut()
    }

    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }

    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        PAGE
    }
}

/// The crate's global allocator on wasm32.
pub struct Heap {
    dl: UnsafeCell<Dlmalloc<GrowingMemory>>,
}

// SAFETY: wasm32 without atomics has one thread, so no two calls overlap.
unsafe impl Sync for Heap {}

impl Heap {
    pub const fn new() -> Heap {
        let sys = GrowingMemory { linker_chunk_used: UnsafeCell::new(false) };
        Heap { dl: UnsafeCell::new(Dlmalloc::new_with_allocator(sys)) }
    }
}

impl Default for Heap {
    fn default() -> Self {
        Heap::new()
    }
}

// SAFETY: dlmalloc's contract, called as std's `GlobalDlmalloc` calls it (one thread, so
// no lock).
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        (*self.dl.get()).malloc(layout.size(), layout.align())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        (*self.dl.get()).free(ptr, layout.size(), layout.align())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        (*self.dl.get()).calloc(layout.size(), layout.align())
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        (*self.dl.get()).realloc(ptr, layout.size(), layout.align(), new_size)
    }
}
