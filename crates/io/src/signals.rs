//! The process's one Ctrl-C mechanism: SIGINT and SIGTERM set a process-wide stop flag.
//!
//! ```text
//!   SIGINT / SIGTERM ──▶ signal-hook handler ──▶ STOP = true ──▶ polled by whoever runs:
//!                                                                  multi::run workers (drain, report)
//!                                                                  lab runners (between trials, then teardown)
//!   a second signal, with SecondSignal::Exit ──▶ exit(130) (a stuck drain can still be stopped)
//! ```
//!
//! The handlers come from `signal-hook` (`flag::register`, `flag::register_conditional_shutdown`),
//! which does the async-signal-safe part: an atomic store, and `_exit` for the second signal.
//! Registration happens once per process whatever the number of callers, because signal-hook's
//! actions add up: registering the flag twice is harmless, but a second conditional shutdown
//! registered after the flag's own action would exit on the first signal.
//!
//! Thread: install from any thread; the flag is read by any thread (`Relaxed` is enough for a
//! stop request; the lab reads it `SeqCst`).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

/// What a second SIGINT/SIGTERM does once the stop flag is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecondSignal {
    /// Exit at once with status 130 (`fastpath run`: a drain that hangs can still be stopped).
    Exit,
    /// Only set the flag again (the lab: its teardown must run whatever the user presses).
    Ignore,
}

/// The process-wide stop flag the handlers set.
pub fn stop_flag() -> &'static Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// What has been registered so far: (flag handlers, exit-on-second handlers).
static INSTALLED: Mutex<(bool, bool)> = Mutex::new((false, false));

/// Installs SIGINT/SIGTERM handlers that set [`stop_flag`], and, with [`SecondSignal::Exit`],
/// exit with status 130 on the signal after the first. Idempotent: handlers are registered at
/// most once per process; once any caller asked for `Exit`, a second signal exits.
///
/// # Errors
/// When the kernel refuses a handler (`sigaction`).
pub fn install_stop_signals(second: SecondSignal) -> io::Result<&'static AtomicBool> {
    let mut done = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
    if !done.0 {
        for sig in [SIGINT, SIGTERM] {
            signal_hook::flag::register(sig, Arc::clone(stop_flag()))?;
        }
        done.0 = true;
    }
    if second == SecondSignal::Exit && !done.1 {
        // Its own "seen" flag, checked before it is set, so the order of this pair against the
        // stop flag's action does not matter: the first signal arms, the second exits.
        let seen = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&seen))?;
            signal_hook::flag::register(sig, Arc::clone(&seen))?;
        }
        done.1 = true;
    }
    Ok(stop_flag())
}

/// True once a stop signal arrived (or [`set_stopped`] said so).
pub fn stopped() -> bool {
    stop_flag().load(Ordering::SeqCst)
}

/// Sets or clears the stop flag by hand (a duration limit, or a test injecting Ctrl-C).
pub fn set_stopped(v: bool) {
    stop_flag().store(v, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Raising signals is left to `tests/signals.rs` (own processes): the flag is process wide
    // and `multi`'s SIGTERM test shares this binary.
    #[test]
    fn installing_twice_returns_the_one_flag() {
        let f = install_stop_signals(SecondSignal::Ignore).unwrap();
        let g = install_stop_signals(SecondSignal::Ignore).unwrap();
        assert!(std::ptr::eq(f, g));
        assert!(std::ptr::eq(f, &**stop_flag()));
    }
}
