//! Progress on a terminal (stderr), silence when piped.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Progress goes to stderr only when it is a terminal and BOOTLINK_QUIET is unset.
fn shown() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("BOOTLINK_QUIET").is_none()
}

pub(crate) struct Progress {
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Show "label n/total" on stderr, refreshed, if stderr is a terminal.
    pub fn new(label: &str, total: usize) -> Progress {
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = if shown() {
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

    pub(crate) fn inc(&self) {
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
    if shown() {
        eprintln!("{msg}");
    }
}

/// A wait for another process (a kernel build of the same line holding
/// its lock): said on stderr terminal or not (unless BOOTLINK_QUIET is
/// set), since it can last as long as that build, and a log read later
/// should say what the time went to.
pub fn waiting(msg: &str) {
    if std::env::var_os("BOOTLINK_QUIET").is_none() {
        eprintln!("{msg}");
    }
}

/// A step of unknown length (a configure or make run): "label m:ss detail"
/// on one line of a terminal, refreshed until dropped; nothing when piped.
pub(crate) struct Ticker {
    detail: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    pub fn new(label: &str) -> Ticker {
        let detail = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = shown().then(|| {
            let (d, s, label) = (detail.clone(), stop.clone(), label.to_string());
            std::thread::spawn(move || {
                let t0 = Instant::now();
                while !s.load(Ordering::Relaxed) {
                    let secs = t0.elapsed().as_secs();
                    let detail = d.lock().map(|d| d.clone()).unwrap_or_default();
                    eprint!("\r\x1b[K{label} {}:{:02} {detail}", secs / 60, secs % 60);
                    let _ = std::io::stderr().flush();
                    std::thread::sleep(Duration::from_millis(250));
                }
                eprint!("\r\x1b[K");
            })
        });
        Ticker { detail, stop, thread }
    }

    /// What the step is doing now (cut to fit a line).
    pub fn set(&self, detail: &str) {
        if self.thread.is_some()
            && let Ok(mut d) = self.detail.lock()
        {
            *d = detail.chars().take(60).collect();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
