//! The control plane's background threads: full classifier builds, the change log's folds and
//! the reaper. Each kind has one long-lived thread that runs its jobs in order, started with
//! the first job; a job's result comes back on a channel.
//!
//! Both choices keep the control thread from waiting on an ordinary thread. A thread started
//! per job inherits the real-time policy of the control thread that starts it (`fastpath run
//! --control-rt`) until its setup gives it up, so its start ran ahead of the front end's
//! answer: 90–600 µs of the P4Runtime answer stage's p99 in update-under-load, by `perf sched`.
//! And joining a thread waits for its exit, which an ordinary thread on a busy core may reach
//! long after its result was in.

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};

/// Work for a background thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// One long-lived background thread, started with the first job.
#[derive(Debug)]
pub(crate) struct Background {
    name: &'static str,
    queue: Option<Sender<Job>>,
}

impl Background {
    pub(crate) fn new(name: &'static str) -> Self {
        Background { name, queue: None }
    }

    /// Runs `f` on the thread, after the jobs before it; its result comes back through the
    /// [`Pending`]. See [`Background::submit`].
    ///
    /// # Errors
    /// No thread could be started.
    pub(crate) fn run<T: Send + 'static>(&mut self, setup: fn(), f: impl FnOnce() -> T + Send + 'static) -> std::io::Result<Pending<T>> {
        let (tx, rx) = channel();
        self.submit(
            setup,
            Box::new(move || {
                let _ = tx.send(f());
            }),
        )?;
        Ok(Pending { rx, done: None, gone: false })
    }

    /// Hands `job` to the thread, after the jobs before it; starts the thread first (it runs
    /// `setup`, then its jobs) when there is none, or the last one ended with a panicking job.
    /// A job handed to a thread that is ending that way is dropped with it.
    ///
    /// # Errors
    /// No thread could be started (`job` is dropped here).
    pub(crate) fn submit(&mut self, setup: fn(), mut job: Job) -> std::io::Result<()> {
        if let Some(q) = &self.queue {
            match q.send(job) {
                Ok(()) => return Ok(()),
                Err(back) => job = back.0,
            }
        }
        self.queue = None;
        let (q, jobs) = channel::<Job>();
        std::thread::Builder::new().name(self.name.into()).spawn(move || {
            setup();
            for job in jobs {
                job();
            }
        })?;
        q.send(job).map_err(|_| std::io::Error::other(format!("{}: the thread ended at its start", self.name)))?;
        self.queue = Some(q);
        Ok(())
    }
}

/// The result of a job on a [`Background`] thread.
#[derive(Debug)]
pub(crate) struct Pending<T> {
    rx: Receiver<T>,
    done: Option<T>,
    /// The job ended without a result (it panicked).
    gone: bool,
}

impl<T> Pending<T> {
    /// True once the result is in, or the job ended without one. Never waits.
    pub(crate) fn is_finished(&mut self) -> bool {
        if self.done.is_none() && !self.gone {
            match self.rx.try_recv() {
                Ok(v) => self.done = Some(v),
                Err(TryRecvError::Disconnected) => self.gone = true,
                Err(TryRecvError::Empty) => {}
            }
        }
        self.done.is_some() || self.gone
    }

    /// The result, waiting for it; `None` when the job panicked.
    pub(crate) fn join(mut self) -> Option<T> {
        self.done.take().or_else(|| self.rx.recv().ok())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Jobs run in order on one thread, set up once; a panicking job gives no result, and the
    /// next job gets a new thread.
    #[test]
    fn one_thread_runs_the_jobs_in_order_and_a_panic_starts_another() {
        static SETUPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let setup = || {
            SETUPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        let mut b = Background::new("fp-test-bg");
        let jobs: Vec<Pending<(u32, std::thread::ThreadId)>> =
            (0..5).map(|k| b.run(setup, move || (k, std::thread::current().id())).unwrap()).collect();
        let done: Vec<(u32, std::thread::ThreadId)> = jobs.into_iter().map(|p| p.join().unwrap()).collect();
        assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
        assert!(done.iter().all(|d| d.1 == done[0].1), "one thread");
        assert_ne!(done[0].1, std::thread::current().id());
        assert_eq!(SETUPS.load(std::sync::atomic::Ordering::SeqCst), 1);
        let mut bad = b.run(setup, || -> u32 { panic!("a job that fails") }).unwrap();
        while !bad.is_finished() {
            std::thread::yield_now();
        }
        assert_eq!(bad.join(), None);
        // A job handed over while the failed thread unwinds is lost with it (no result).
        let after = loop {
            if let Some(id) = b.run(setup, || std::thread::current().id()).unwrap().join() {
                break id;
            }
        };
        assert_ne!(after, done[0].1, "a new thread after the panic");
        assert_eq!(SETUPS.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
