//! The work an engine does behind its requests' backs (announcing a job's start, a reused
//! agent's console line, a pass over the warm pools): spawned on the runtime so a request answers
//! GoCD without waiting for it, and counted, so whoever needs it done (a test reading what it
//! wrote, a shutdown) awaits [`Background::settled`] instead of waiting for time to pass.

use std::future::Future;

use tokio::sync::watch;

/// Counts the engine's background tasks in flight.
#[derive(Debug)]
pub struct Background {
    running: watch::Sender<usize>,
}

impl Default for Background {
    fn default() -> Self {
        Self { running: watch::Sender::new(0) }
    }
}

impl Background {
    /// Runs `work` on the runtime, counted until it ends (or is dropped unfinished).
    pub fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let done = InFlight::start(self.running.clone());
        tokio::spawn(async move {
            work.await;
            drop(done);
        });
    }

    /// Returns once no background task is in flight, including those that the ones in flight
    /// started before ending.
    pub async fn settled(&self) {
        let mut running = self.running.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail while it is borrowed.
        let _ = running.wait_for(|n| *n == 0).await;
    }
}

/// One task in flight: counted when made, uncounted when dropped, so a task that panics or is
/// cancelled is not waited for forever.
struct InFlight(watch::Sender<usize>);

impl InFlight {
    fn start(running: watch::Sender<usize>) -> Self {
        running.send_modify(|n| *n += 1);
        Self(running)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::Background;

    #[tokio::test]
    async fn settled_waits_for_every_task_and_the_tasks_they_start() {
        let background = Arc::new(Background::default());
        let (first, second) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (b, f, s) = (background.clone(), first.clone(), second.clone());
        background.spawn(async move {
            tokio::task::yield_now().await;
            f.store(true, Ordering::SeqCst);
            b.spawn(async move {
                tokio::task::yield_now().await;
                s.store(true, Ordering::SeqCst);
            });
        });
        background.settled().await;
        assert!(first.load(Ordering::SeqCst) && second.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_task_that_panics_is_not_waited_for_forever() {
        let background = Background::default();
        background.spawn(async { panic!("a background task failed") });
        background.settled().await;
    }
}
