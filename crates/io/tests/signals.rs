//! The stop signals of `io::signals`, each case in a child process of this test binary (the
//! flag and the handlers are process wide; a second signal may end the process).

use fastpath_io::signals::{install_stop_signals, set_stopped, stopped, SecondSignal};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::low_level::raise;

const MODE: &str = "FASTPATH_SIGNALS_CHILD";

/// Runs `child` in a fresh process with `MODE=mode`; returns its exit status.
fn run_child(mode: &str) -> std::process::ExitStatus {
    let exe = std::env::current_exe().unwrap();
    std::process::Command::new(exe)
        .args(["--exact", "child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(MODE, mode)
        .status()
        .unwrap()
}

/// The child's side (ignored unless a parent test starts it).
#[test]
#[ignore = "started as a child process by the other tests of this file"]
fn child() {
    let Ok(mode) = std::env::var(MODE) else { return };
    let second = if mode == "exit" { SecondSignal::Exit } else { SecondSignal::Ignore };
    // Installing twice must not register twice (a doubled conditional exit would fire on the
    // first signal).
    install_stop_signals(second).unwrap();
    install_stop_signals(second).unwrap();
    set_stopped(false);
    raise(SIGINT).unwrap();
    assert!(stopped(), "the first SIGINT only sets the flag");
    raise(SIGTERM).unwrap();
    assert_eq!(mode, "ignore", "with SecondSignal::Exit the second signal must have exited");
}

#[test]
fn first_signal_sets_the_flag_and_second_exits_only_when_asked() {
    let ignore = run_child("ignore");
    assert!(ignore.success(), "Ignore: the process must survive two signals ({ignore})");
    let exit = run_child("exit");
    assert_eq!(exit.code(), Some(130), "Exit: the second signal exits with 130 ({exit})");
}
