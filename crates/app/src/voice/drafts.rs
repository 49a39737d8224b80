//! What the person is saying, read into the model while they speak, one
//! reading at a time. The model reads a prompt in chunks it cannot leave
//! midway: a reading cancelled by the next one, or by the send, still
//! holds the model until its chunk is read, and what it read is then
//! dropped, so the reply waits for work it cannot use. Here a new reading
//! waits while one is read (only the latest waits), and the send first
//! lets the reading under way finish, so the reply starts from it.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct State {
    /// A reading is under way.
    running: bool,
    /// When the reading under way began.
    began: Option<Instant>,
    /// The latest reading offered while another was read.
    next: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Drafts {
    state: Arc<Mutex<State>>,
}

impl Drafts {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `so_far` is read by `read` now, or once the reading under way ends
    /// (unless a later one is offered first).
    pub(crate) fn offer<F, Fut>(&self, so_far: String, runtime: &tokio::runtime::Handle, read: F)
    where
        F: Fn(String) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        {
            let mut s = self.state();
            if s.running {
                s.next = Some(so_far);
                return;
            }
            s.running = true;
            s.began = Some(Instant::now());
        }
        let drafts = self.clone();
        runtime.spawn(async move {
            read(so_far).await;
            loop {
                let next = {
                    let mut s = drafts.state();
                    match s.next.take() {
                        Some(t) => {
                            s.began = Some(Instant::now());
                            t
                        }
                        None => {
                            s.running = false;
                            s.began = None;
                            break;
                        }
                    }
                };
                read(next).await;
            }
        });
    }

    /// The message is about to be sent: a reading not yet started is
    /// dropped, and the one under way is waited for, at most `longest`,
    /// unless `held_up(began)` says other work that began before it holds
    /// the model: the reading then only waits its turn, and the send (which
    /// stops that work) is better off going now.
    pub(crate) async fn settle(&self, longest: Duration, held_up: impl Fn(Instant) -> bool) {
        let deadline = Instant::now() + longest;
        loop {
            {
                let mut s = self.state();
                s.next = None;
                if !s.running || s.began.is_some_and(&held_up) {
                    return;
                }
            }
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Clone, Default)]
    struct Reader {
        read: Arc<Mutex<Vec<String>>>,
        active: Arc<AtomicUsize>,
        most_at_once: Arc<AtomicUsize>,
    }

    impl Reader {
        fn offer(&self, drafts: &Drafts, text: &str) {
            let me = self.clone();
            drafts.offer(text.to_owned(), &tokio::runtime::Handle::current(), move |t| {
                let me = me.clone();
                async move {
                    let now = me.active.fetch_add(1, Ordering::SeqCst) + 1;
                    me.most_at_once.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    me.read.lock().unwrap().push(t);
                    me.active.fetch_sub(1, Ordering::SeqCst);
                }
            });
        }
        fn read(&self) -> Vec<String> {
            self.read.lock().unwrap().clone()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drafts_are_read_one_at_a_time_and_only_the_latest_waits() {
        let (drafts, reader) = (Drafts::default(), Reader::default());
        for text in ["what", "what is", "what is the"] {
            reader.offer(&drafts, text);
        }
        tokio::time::sleep(Duration::from_millis(400)).await;
        // "what is" gave way to "what is the" while "what" was read.
        assert_eq!(reader.read(), ["what", "what is the"]);
        assert_eq!(reader.most_at_once.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_send_waits_for_the_reading_under_way_and_drops_the_one_waiting() {
        let (drafts, reader) = (Drafts::default(), Reader::default());
        reader.offer(&drafts, "what is");
        reader.offer(&drafts, "what is the capital");
        drafts.settle(Duration::from_secs(5), |_| false).await;
        assert_eq!(reader.read(), ["what is"], "the reading under way ended before the send");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(reader.read(), ["what is"], "the waiting reading was dropped");
        // A later draft is read again.
        reader.offer(&drafts, "and Spain");
        drafts.settle(Duration::from_secs(5), |_| false).await;
        assert_eq!(reader.read(), ["what is", "and Spain"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_send_does_not_wait_for_a_reading_held_up_behind_earlier_work() {
        let (drafts, reader) = (Drafts::default(), Reader::default());
        let earlier_work = Instant::now();
        // A reading that would take 3 s.
        drafts.offer("what".to_owned(), &tokio::runtime::Handle::current(), |_| tokio::time::sleep(Duration::from_secs(3)));
        // Work that began before the reading holds the model: go now.
        let started = Instant::now();
        drafts.settle(Duration::from_secs(5), |began| earlier_work <= began).await;
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        drafts.settle(Duration::from_secs(5), |_| false).await;
        // Work that began after it waits behind the reading: it is waited for.
        reader.offer(&drafts, "what is the");
        let later_work = Instant::now() + Duration::from_secs(1);
        drafts.settle(Duration::from_secs(5), |began| later_work <= began).await;
        assert!(reader.read().contains(&"what is the".to_owned()), "{:?}", reader.read());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_send_waits_no_longer_than_its_bound() {
        let (drafts, reader) = (Drafts::default(), Reader::default());
        reader.offer(&drafts, "what is");
        let started = Instant::now();
        drafts.settle(Duration::from_millis(10), |_| false).await;
        assert!(started.elapsed() < Duration::from_millis(50));
        assert!(reader.read().is_empty());
    }
}
