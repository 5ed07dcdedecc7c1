//! Progress on a terminal (stderr), silence when piped.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

pub struct Progress {
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Show "label n/total" on stderr, refreshed, if stderr is a terminal.
    pub fn new(label: &str, total: usize) -> Progress {
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = if std::io::stderr().is_terminal() && std::env::var_os("BOOTLINK_QUIET").is_none() {
            let (d, s, label) = (done.clone(), stop.clone(), label.to_string());
            Some(std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    eprint!("\r\x1b[K{label} {}/{total}", d.load(Ordering::Relaxed));
                    let _ = std::io::stderr().flush();
                    std::thread::sleep(Duration::from_millis(100));
                }
                eprint!("\r\x1b[K");
            }))
        } else {
            None
        };
        Progress { done, stop, thread }
    }

    pub fn inc(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A one-line status message on a terminal only.
pub fn status(msg: &str) {
    if std::io::stderr().is_terminal() && std::env::var_os("BOOTLINK_QUIET").is_none() {
        eprintln!("{msg}");
    }
}
