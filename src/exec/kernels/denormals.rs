//! Denormal floats flush to zero while a kernel runs, as in TensorFlow's
//! CPU kernels (which run under a scoped flush-denormal setting) and in
//! XLA:CPU: a subnormal input reads as zero and a subnormal result is
//! written as zero (of its sign).
//!
//! [`FlushDenormals`] sets the processor's flush-to-zero and
//! denormals-are-zero modes for the current thread and restores the
//! previous modes when dropped, so kernels nest and code outside them keeps
//! IEEE behaviour. On x86-64 these are the MXCSR FTZ and DAZ bits; on
//! AArch64 the FPCR FZ bit (which covers both); elsewhere nothing changes.

/// Flush-to-zero for the current thread while this value lives.
pub(crate) struct FlushDenormals {
    #[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))]
    saved: u64,
}

#[cfg(target_arch = "x86_64")]
mod arch {
    /// MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6).
    pub const FLUSH: u64 = (1 << 15) | (1 << 6);

    pub fn get() -> u64 {
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr stores the 32-bit control register into `csr`, which is valid for writes.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags)) };
        u64::from(csr)
    }

    pub fn set(value: u64) {
        let csr = value as u32;
        // SAFETY: ldmxcsr loads a control value read from the register with mode bits changed;
        // no reserved bit is set.
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, readonly, preserves_flags)) };
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    /// FPCR's flush-to-zero (bit 24).
    pub const FLUSH: u64 = 1 << 24;

    pub fn get() -> u64 {
        let fpcr: u64;
        // SAFETY: reading FPCR has no side effects.
        unsafe { std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags)) };
        fpcr
    }

    pub fn set(value: u64) {
        // SAFETY: writes back a value read from FPCR with only the FZ bit changed.
        unsafe { std::arch::asm!("msr fpcr, {}", in(reg) value, options(nomem, nostack, preserves_flags)) };
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod arch {
    pub const FLUSH: u64 = 0;

    pub fn get() -> u64 {
        0
    }

    pub fn set(_: u64) {}
}

impl FlushDenormals {
    /// Turns flushing on for this thread until the value is dropped.
    pub(crate) fn new() -> FlushDenormals {
        let saved = arch::get();
        if saved & arch::FLUSH != arch::FLUSH {
            arch::set(saved | arch::FLUSH);
        }
        FlushDenormals { saved }
    }
}

impl Drop for FlushDenormals {
    fn drop(&mut self) {
        if self.saved & arch::FLUSH != arch::FLUSH {
            arch::set(self.saved);
        }
    }
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::FlushDenormals;

    #[test]
    fn subnormal_results_flush_to_zero_only_inside_the_guard() {
        let tiny = std::hint::black_box(f32::MIN_POSITIVE);
        let half = std::hint::black_box(0.5f32);
        assert!((tiny * half).is_subnormal(), "IEEE outside the guard");
        {
            let _flush = FlushDenormals::new();
            assert_eq!((tiny * half).to_bits(), 0.0f32.to_bits(), "flushed inside");
            let sub = std::hint::black_box(1e-40f32);
            assert_eq!(sub * 1.0, 0.0, "a subnormal input reads as zero");
        }
        assert!((tiny * half).is_subnormal(), "restored after");
    }
}
