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

/// Parses, rewrites and prints a graph with the library; returns the text.
fn embed() -> Result<String, Box<dyn std::error::Error>> {
    let source = b"graph @main {\n  %a = Const() {dtype = f32, value = tensor(f32, [1]) [1.0]}\n}\n";
    let (mut module, errors) = tpu_rewrite::parse_module(source)?;
    assert!(errors.is_empty());
    let report = tpu_rewrite::run_pipeline(&mut module, &tpu_rewrite::PipelineConfig::default());
    assert!(!report.has_errors());
    Ok(tpu_rewrite::print_module(&module))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    print!("{}", embed()?);
    println!("allocations: {}", ALLOCATIONS.load(Ordering::Relaxed));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedders_allocator_serves_the_library() {
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        let text = embed().expect("the library runs");
        assert!(text.contains("graph @main"), "{text}");
        assert!(ALLOCATIONS.load(Ordering::Relaxed) > before, "the library allocated through the embedder's allocator");
    }
}
