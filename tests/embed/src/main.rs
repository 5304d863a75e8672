//! Embeds tpu-rewrite with a global allocator of its own: a counting
//! wrapper around the system allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = b"graph @main {\n  %a = Const() {dtype = f32, value = tensor(f32, [1]) [1.0]}\n}\n";
    let (mut module, errors) = tpu_rewrite::parse_module(source)?;
    assert!(errors.is_empty());
    let report = tpu_rewrite::run_pipeline(&mut module, &tpu_rewrite::PipelineConfig::default());
    assert!(!report.has_errors());
    print!("{}", tpu_rewrite::print_module(&module));
    println!("allocations: {}", ALLOCATIONS.load(Ordering::Relaxed));
    Ok(())
}
