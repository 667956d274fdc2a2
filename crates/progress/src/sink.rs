//! The one callback holder a library reports through.

use std::fmt;
use std::sync::Arc;

/// A callback a library tells things to: progress updates, notes, warnings. The default holds
/// none, so the library neither prints nor draws; the binary sets one and decides what reaches
/// the terminal.
///
/// One holder for every kind of report, so each library takes its callbacks the same way:
/// `Sink<StudyProgress>` for a study's runs, `Sink<str>` for warnings, a library's own type
/// for its own progress. It is cheap to clone (an `Arc`) and `Send + Sync`, so the threads and
/// tasks of one library can share it; the callback therefore takes `&T` and must be `Fn`
/// (a callback that keeps state uses a `Mutex` or atomics).
pub struct Sink<T: ?Sized>(Option<Arc<SinkFn<T>>>);

type SinkFn<T> = dyn Fn(&T) + Send + Sync;

impl<T: ?Sized> Sink<T> {
    /// Hands everything told to `f`.
    pub fn new(f: impl Fn(&T) + Send + Sync + 'static) -> Self {
        Sink(Some(Arc::new(f)))
    }

    /// No callback: everything told is dropped (the same as `Sink::default()`).
    pub fn none() -> Self {
        Sink(None)
    }

    /// Whether anyone listens (a library skips building what no one hears).
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// Tells `item` to the callback, if there is one.
    pub fn tell(&self, item: &T) {
        if let Some(f) = &self.0 {
            f(item);
        }
    }
}

// Not derived: those would require `T: Clone` / `T: Default` / `T: Debug`.
impl<T: ?Sized> Clone for Sink<T> {
    fn clone(&self) -> Self {
        Sink(self.0.clone())
    }
}

impl<T: ?Sized> Default for Sink<T> {
    fn default() -> Self {
        Sink(None)
    }
}

impl<T: ?Sized> fmt::Debug for Sink<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_set() {
            "Sink(set)"
        } else {
            "Sink(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    #[test]
    fn a_set_sink_hands_every_item_to_its_callback_in_order() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let h = Arc::clone(&heard);
        let sink = Sink::new(move |x: &u32| h.lock().unwrap().push(*x));
        assert!(sink.is_set());
        for x in [3, 1, 2] {
            sink.tell(&x);
        }
        assert_eq!(*heard.lock().unwrap(), vec![3, 1, 2]);
        assert_eq!(format!("{sink:?}"), "Sink(set)");
    }

    #[test]
    fn an_unset_sink_calls_nothing() {
        let sink: Sink<u32> = Sink::default();
        assert!(!sink.is_set());
        sink.tell(&7); // nothing to call, nothing happens
        assert!(!Sink::<str>::none().is_set());
        assert_eq!(format!("{sink:?}"), "Sink(none)");
    }

    #[test]
    fn unsized_items_such_as_str_are_told_by_reference() {
        let heard = Arc::new(Mutex::new(String::new()));
        let h = Arc::clone(&heard);
        let warnings: Sink<str> = Sink::new(move |w: &str| h.lock().unwrap().push_str(w));
        warnings.tell("disk slow");
        warnings.tell(&format!(", {} retries", 2));
        assert_eq!(*heard.lock().unwrap(), "disk slow, 2 retries");
    }

    #[test]
    fn clones_share_one_callback_across_threads() {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = Arc::clone(&calls);
        let sink = Sink::new(move |n: &usize| {
            c.fetch_add(*n, Ordering::SeqCst);
        });
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = sink.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        s.tell(&1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), 4000);
    }
}
