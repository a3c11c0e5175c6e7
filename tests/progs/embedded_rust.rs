// embedded_rust — a Rust program with a global allocator of its own (a
// bump allocator over a static region: it never calls malloc, as a
// program built with a jemalloc or mimalloc crate does not), so an
// LD_PRELOAD malloc sees none of its allocations. heaptrail hooks
// __rust_alloc and its siblings with no option (its built-in profile for
// Rust programs with a #[global_allocator], test_allocfn.py). Each site
// leaks what it counts and prints it: site FUNCTION BYTES BLOCKS.
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

// A bump allocator over a static region: never calls malloc.
struct Bump;
const REGION: usize = 8 << 20;
static mut HEAP: [u8; REGION] = [0; REGION];
static NEXT: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let align = l.align().max(16);
        let mut cur = NEXT.load(Ordering::Relaxed);
        loop {
            let start = (cur + align - 1) & !(align - 1);
            let end = start + l.size();
            if end > REGION {
                return std::ptr::null_mut();
            }
            match NEXT.compare_exchange(cur, end, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return HEAP.as_mut_ptr().add(start),
                Err(c) => cur = c,
            }
        }
    }
    unsafe fn dealloc(&self, _p: *mut u8, _l: Layout) {}
}

#[global_allocator]
static A: Bump = Bump;

#[inline(never)]
fn leak_names() -> usize {
    let mut n = 0;
    for i in 0..4 {
        let v: Vec<u8> = vec![i as u8; 100];
        n += v.len();
        std::mem::forget(v);
    }
    n
}

#[inline(never)]
fn leak_box() -> usize {
    let b = Box::new([7u64; 16]);
    Box::leak(b);
    128
}

#[inline(never)]
fn churn() {
    for i in 0..1000 {
        let s = format!("item {}", i);
        assert!(s.len() > 5);
    }
}

fn main() {
    churn();
    let a = leak_names();
    let b = leak_box();
    println!("site leak_names {} 4", a);
    println!("site leak_box {} 1", b);
}
