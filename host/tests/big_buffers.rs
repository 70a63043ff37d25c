//! The operator's allocator (process/allocator.rs): a big buffer (a module's bytes, compiled
//! code read from the cache) freed on another thread than the one that allocated it goes back
//! to the system at once. With mimalloc alone it stayed resident while the allocating thread
//! idled (an operator idle with the Python rules kept the module's 18 MiB). Alone in its test
//! binary, with the operator's allocator, so the process's memory is this test's.

use zundoko_operator::process::allocator::{BIG, OperatorAllocator};

#[global_allocator]
static ALLOCATOR: OperatorAllocator = OperatorAllocator;

/// One test at a time: the other's buffers would count in this one's RSS.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn anonymous_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_big_buffer_freed_on_another_thread_goes_back_to_the_system_while_its_maker_idles() {
    const MIB: usize = 18;
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let before = anonymous_kib();
    // The maker reads a "module" (every page written), hands it over, and then idles, as a
    // blocking thread that read a file does; the receiver drops it.
    let (handed, received) = std::sync::mpsc::channel::<Vec<u8>>();
    let (done, idle_until) = std::sync::mpsc::channel::<()>();
    let maker = std::thread::spawn(move || {
        let bytes: Vec<u8> = (0..MIB << 20).map(|i| (i % 251) as u8 | 1).collect();
        handed.send(bytes).unwrap();
        idle_until.recv().unwrap();
    });
    let bytes = received.recv().unwrap();
    assert!(bytes.iter().all(|&b| b != 0), "the buffer holds what was written");
    let holding = anonymous_kib();
    drop(bytes);
    let after = anonymous_kib();
    done.send(()).unwrap();
    maker.join().unwrap();
    eprintln!("RssAnon: {before} kB before, {holding} kB holding {MIB} MiB, {after} kB after the drop on another thread");
    assert!(holding - after >= (MIB as i64 - 1) << 10, "only {} kB of the dropped {MIB} MiB went back to the system", holding - after);
}

#[test]
fn a_buffer_grown_past_the_threshold_and_shrunk_below_it_keeps_its_bytes() {
    let _alone = ALONE.lock().unwrap_or_else(|p| p.into_inner());
    let expected = |i: usize| (i.wrapping_mul(2_654_435_761) >> 7) as u8;
    let mut grown: Vec<u8> = Vec::new();
    // Small, then moved to a mapping of its own, then grown in place or moved by mremap.
    for i in 0..3 * BIG {
        grown.push(expected(i));
    }
    assert!(grown.iter().enumerate().all(|(i, &b)| b == expected(i)), "bytes lost growing past {BIG}");
    // Big to small: copied back into mimalloc.
    grown.truncate(BIG / 4);
    grown.shrink_to_fit();
    assert!(grown.iter().enumerate().all(|(i, &b)| b == expected(i)), "bytes lost shrinking below {BIG}");
    // Zeroed and aligned, as the contract asks.
    let zeroed = vec![0u64; BIG / 8];
    assert!(zeroed.iter().all(|&w| w == 0));
    assert_eq!(zeroed.as_ptr() as usize % std::mem::align_of::<u64>(), 0);
    // An alignment beyond a page goes to mimalloc, and is met.
    let layout = std::alloc::Layout::from_size_align(BIG, 1 << 16).unwrap();
    // SAFETY: a valid layout, freed with the same.
    unsafe {
        let p = std::alloc::alloc(layout);
        assert!(!p.is_null() && (p as usize).is_multiple_of(1 << 16));
        std::alloc::dealloc(p, layout);
    }
}
