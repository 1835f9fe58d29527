//! Giving freed memory back to the system.
//!
//! glibc's allocator returns memory to the kernel only from the top of its heaps: pages freed
//! below a block still in use stay resident. The CCM's work comes in waves (a listing of 1000
//! servers, a pass over 1000 routes, a re-list of the Nodes) whose transient allocations leave
//! such pages behind. `malloc_trim(0)` hands every whole free page back, so [`spawn_trim`] calls
//! it periodically: at 1000 Nodes that keeps the resident set about 0.8 MiB lower. (What it
//! cannot return is free space smaller than a page between live blocks.) Without glibc
//! (musl, other systems) this is a no-op.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often freed pages are handed back. A call walks the allocator's free lists, well under
/// a millisecond for this process's heap.
pub const TRIM_PERIOD: Duration = Duration::from_secs(10);

/// Hand freed pages back to the kernel every [`TRIM_PERIOD`] until `shutdown`.
pub fn spawn_trim(shutdown: CancellationToken) {
    if !trim_supported() {
        return;
    }
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(TRIM_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {
                    trim();
                }
            }
        }
    });
}

/// Whether [`trim`] does anything on this target.
pub const fn trim_supported() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu"))
}

/// Hand every free page of the allocator back to the kernel now. Returns whether memory was
/// released.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn trim() -> bool {
    // SAFETY: `malloc_trim` takes the allocator's own locks and only releases memory that is
    // free; it has no preconditions on the caller.
    unsafe { libc::malloc_trim(0) != 0 }
}

/// Hand every free page of the allocator back to the kernel now (a no-op on this target).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_after_freeing_a_large_heap_releases_memory() {
        if !trim_supported() {
            return;
        }
        // Many small blocks (below the mmap threshold, so on the heap); all but every 64th freed:
        // the free pages sit between blocks still in use, where only a trim reaches them.
        let mut blocks: Vec<Vec<u8>> = (0..20_000).map(|_| vec![1u8; 1024]).collect();
        let kept: Vec<Vec<u8>> = blocks.iter_mut().step_by(64).map(std::mem::take).collect();
        drop(blocks);
        assert!(
            trim(),
            "a heap with free pages between used blocks is trimmed"
        );
        assert_eq!(kept.len(), 313);
    }
}
