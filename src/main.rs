//! The `tpu-rewrite` binary: the command-line interface in `cli` over the
//! `tpu_rewrite` library.

mod cli;

// The CLI names library items as `crate::<module>::...`: the library's
// modules, re-exported at the binary's root, give those paths.
use tpu_rewrite::{diagnostics, emit, exec, ir, lower, passes, progress, session, syntax, tf, xla};

/// The global allocator (feature `mimalloc`, on by default): graphs of
/// millions of small nodes spend a fifth of their time in malloc/free with
/// the system allocator. It is the binary's choice; the library sets none.
/// Either way it is wrapped in `exec::memory::CountingAlloc`, which counts
/// the live bytes `run --max-memory` bounds.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: exec::memory::CountingAlloc<NaturalMiMalloc> = exec::memory::CountingAlloc(NaturalMiMalloc);

/// mimalloc, asked for plain blocks whenever any block meets the alignment.
///
/// `mimalloc::MiMalloc` asks `mi_malloc_aligned` for every allocation.
/// mimalloc 3 serves that from the size's own page only while the page has
/// a free block; otherwise, for a size whose block is not a power of two,
/// it allocates `size + align - 1` bytes, from the next size class up, and
/// goes on doing so while nothing refills the size's own page. A graph's
/// names, attribute maps and tensor literals (40, 80, 112-byte blocks) then
/// sit in 48, 96, 128-byte ones. Every mimalloc block is aligned to 8 bytes
/// (block sizes are multiples of the word, pages start aligned), so an
/// alignment of at most 8 needs no aligned call; larger ones keep it.
#[cfg(feature = "mimalloc")]
struct NaturalMiMalloc;

/// The largest alignment every mimalloc block has.
#[cfg(feature = "mimalloc")]
const MI_BLOCK_ALIGN: usize = 8;

// SAFETY: each call goes to mimalloc's plain functions only when every
// block they return meets `layout.align()` (at most 8, see above), and to
// the `mimalloc` crate's own aligned implementation otherwise; frees go to
// `mi_free`, which takes blocks from either.
#[cfg(feature = "mimalloc")]
unsafe impl std::alloc::GlobalAlloc for NaturalMiMalloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= MI_BLOCK_ALIGN {
            libmimalloc_sys::mi_malloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.align() <= MI_BLOCK_ALIGN {
            libmimalloc_sys::mi_zalloc(layout.size()).cast()
        } else {
            mimalloc::MiMalloc.alloc_zeroed(layout)
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        mimalloc::MiMalloc.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= MI_BLOCK_ALIGN {
            libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast()
        } else {
            mimalloc::MiMalloc.realloc(ptr, layout, new_size)
        }
    }
}

#[cfg(not(feature = "mimalloc"))]
#[global_allocator]
static GLOBAL: exec::memory::CountingAlloc<std::alloc::System> = exec::memory::CountingAlloc(std::alloc::System);

fn main() -> std::process::ExitCode {
    disable_transparent_huge_pages();
    cli::main()
}

/// Turns transparent huge pages off for this process. mimalloc asks for
/// them on its arenas, and the kernel then zeroes a whole 2 MB page on the
/// first touch of any byte of it: importing and lowering a 1M-op graph
/// spent 1.1-2 s of system time on that (`clear_page_erms`), against
/// 0.8 s with 4 KB pages, for the same peak memory. The graph passes walk
/// their nodes in order, so the larger TLB reach does not win it back.
#[cfg(target_os = "linux")]
fn disable_transparent_huge_pages() {
    // SAFETY: PR_SET_THP_DISABLE takes plain integer arguments and only
    // changes a flag of this process; a failure (an old kernel) leaves the
    // default, which is correct, only slower.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_transparent_huge_pages() {}

/// mimalloc's `purge_delay` option (`mi_option_purge_delay` in its
/// `mimalloc.h`; the Rust bindings name no constant for it).
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps the memory the process frees for its own later allocations
/// instead of returning it to the OS. A step frees most of what it
/// allocated (the simulator's activations, gradients and patch buffers;
/// the PJRT plugin's temporaries, whose `malloc` is mimalloc's too) and
/// the next step asks for the same again: returned, those pages are
/// faulted in and zeroed afresh every step, which took a third of a
/// ResNet50 training step's CPU time on either backend
/// (docs/performance.md). The peak stays that of one step.
#[cfg(feature = "mimalloc")]
pub(crate) fn keep_freed_memory() {
    // SAFETY: `mi_option_set` only stores an integer option, read by the
    // allocator when it next decides whether to purge.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// Without mimalloc the allocator is the system's, whose options are its own.
#[cfg(not(feature = "mimalloc"))]
pub(crate) fn keep_freed_memory() {}

/// Runs before `main` and before Rust's runtime reopens a closed stdout
/// on `/dev/null`: records whether it was closed (`>&-`), so that writing
/// the result fails instead of vanishing.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static RECORD_STDOUT: extern "C" fn() = {
    extern "C" fn record() {
        cli::console::record_stdout_at_start();
    }
    record
};
