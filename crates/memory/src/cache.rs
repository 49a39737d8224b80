//! An embedder that remembers its recent answers.
//!
//! A reply's retrieval embeds the human's message as the query, and the
//! index embeds the same message for later searches. With this cache the
//! model runs once per text, and the app can embed a message while it is
//! still being typed or written to the ledger, off the reply's critical path.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use crate::embed::Embedder;
use crate::error::MemoryError;

pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    capacity: usize,
    cache: Mutex<Lru>,
    /// Signalled whenever texts stop being in flight.
    landed: Condvar,
}

#[derive(Default)]
struct Lru {
    map: HashMap<String, Vec<f32>>,
    order: VecDeque<String>,
    /// Texts some caller is embedding right now: a second caller asking for
    /// one waits for it instead of running the model again. Other texts
    /// (a background batch, say) never make a caller wait.
    in_flight: HashSet<String>,
}

impl Lru {
    fn get(&self, text: &str) -> Option<Vec<f32>> {
        self.map.get(text).cloned()
    }

    fn put(&mut self, text: &str, v: Vec<f32>, capacity: usize) {
        // (A capacity smaller than one call's batch still answers the call:
        // `embed` keeps its own copies.)
        if self.map.insert(text.to_owned(), v).is_none() {
            self.order.push_back(text.to_owned());
        }
        while self.order.len() > capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

impl CachedEmbedder {
    pub fn new(inner: Arc<dyn Embedder>, capacity: usize) -> Self {
        Self { inner, capacity: capacity.max(1), cache: Mutex::new(Lru::default()), landed: Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Texts being embedded by one caller; released (and waiters woken) when
/// dropped, even if the model panics.
struct Claim<'a> {
    owner: &'a CachedEmbedder,
    texts: &'a [&'a str],
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut cache = self.owner.lock();
        for t in self.texts {
            cache.in_flight.remove(*t);
        }
        self.owner.landed.notify_all();
    }
}

impl Embedder for CachedEmbedder {
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn model_id(&self) -> String {
        self.inner.model_id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
        let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        loop {
            // Under the lock: take what is cached, claim what nobody is computing.
            let mut mine: Vec<usize> = Vec::new();
            let mut waiting = false;
            {
                let mut cache = self.lock();
                for (i, t) in texts.iter().enumerate() {
                    if out[i].is_some() {
                        continue;
                    }
                    if let Some(v) = cache.get(t) {
                        out[i] = Some(v);
                    } else if cache.in_flight.contains(*t) {
                        waiting = true;
                    } else if !mine.iter().any(|&j| texts[j] == *t) {
                        cache.in_flight.insert((*t).to_owned());
                        mine.push(i);
                    } else {
                        waiting = true; // a duplicate inside this call: filled below
                    }
                }
                if mine.is_empty() && waiting {
                    drop(self.landed.wait(cache).unwrap_or_else(|e| e.into_inner()));
                    continue;
                }
            }
            if mine.is_empty() {
                break;
            }
            let batch: Vec<&str> = mine.iter().map(|&i| texts[i]).collect();
            // Released after the results are cached (or on any error or panic).
            let claim = Claim { owner: self, texts: &batch };
            let fresh = self.inner.embed(&batch)?;
            if fresh.len() != batch.len() {
                return Err(MemoryError::Embed("the model returned too few vectors".into()));
            }
            let mut cache = self.lock();
            for (&i, v) in mine.iter().zip(fresh) {
                cache.put(texts[i], v.clone(), self.capacity);
                out[i] = Some(v);
            }
            drop(cache);
            drop(claim);
            if !waiting {
                break;
            }
        }
        Ok(out.into_iter().map(Option::unwrap_or_default).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::embed::HashingEmbedder;

    struct Counting {
        inner: HashingEmbedder,
        texts: AtomicUsize,
    }

    impl Embedder for Counting {
        fn dim(&self) -> usize {
            self.inner.dim
        }
        fn model_id(&self) -> String {
            "counting".into()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
            self.texts.fetch_add(texts.len(), Ordering::SeqCst);
            self.inner.embed(texts)
        }
    }

    #[test]
    fn each_text_reaches_the_model_once_and_answers_match_the_model() {
        let counting = Arc::new(Counting { inner: HashingEmbedder::default(), texts: AtomicUsize::new(0) });
        let cached = CachedEmbedder::new(counting.clone(), 8);
        let a = cached.embed(&["hello there"]).unwrap();
        let ab = cached.embed(&["general kenobi", "hello there"]).unwrap();
        assert_eq!(counting.texts.load(Ordering::SeqCst), 2, "only the new text went to the model");
        assert_eq!(ab[1], a[0]);
        assert_eq!(ab, HashingEmbedder::default().embed(&["general kenobi", "hello there"]).unwrap(), "order kept");
    }

    #[test]
    fn concurrent_callers_share_one_model_run_per_text() {
        struct Slow(Counting);
        impl Embedder for Slow {
            fn dim(&self) -> usize {
                self.0.dim()
            }
            fn model_id(&self) -> String {
                "slow".into()
            }
            fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, MemoryError> {
                std::thread::sleep(std::time::Duration::from_millis(50));
                self.0.embed(texts)
            }
        }
        let slow = Arc::new(Slow(Counting { inner: HashingEmbedder::default(), texts: AtomicUsize::new(0) }));
        let cached = Arc::new(CachedEmbedder::new(slow.clone(), 8));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = cached.clone();
                std::thread::spawn(move || c.embed(&["same draft", "same draft"]).unwrap())
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(slow.0.texts.load(Ordering::SeqCst), 1, "four callers, one model run");
        assert!(results.iter().all(|r| r == &results[0] && r[0] == r[1]));
    }

    #[test]
    fn the_oldest_entries_are_dropped_beyond_capacity() {
        let counting = Arc::new(Counting { inner: HashingEmbedder::default(), texts: AtomicUsize::new(0) });
        let cached = CachedEmbedder::new(counting.clone(), 2);
        for t in ["a", "b", "c"] {
            cached.embed(&[t]).unwrap();
        }
        cached.embed(&["c", "b"]).unwrap();
        assert_eq!(counting.texts.load(Ordering::SeqCst), 3);
        cached.embed(&["a"]).unwrap();
        assert_eq!(counting.texts.load(Ordering::SeqCst), 4, "'a' was evicted first");
    }
}
