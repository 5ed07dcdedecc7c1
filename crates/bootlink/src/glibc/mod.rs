//! `bootlink glibc build`: Debian's glibc, the version installed on this
//! machine, with bootlink's patch series (`glibc/patches/series`), built
//! once per content and kept in the cache.
//!
//! The pieces: [`source`] (the source package fetched with a private apt
//! sources list, unpacked with Debian's patches, the series applied),
//! [`build`] (configure, make, install, the log).
//!
//! Everything of one build lives in `<cache>/glibc/<key>/`, the key being a
//! hash of the Debian version and its `.dsc`, the series' diffs in order,
//! the configure arguments and [`RECIPE`]: `prefix/` (the install prefix,
//! baked into ld.so, so one per key), `build.log`, and `done.json` (this
//! build's [`Report`]), written last. While building it also holds
//! `src/` and `build/` (removed when done; ccache keeps a rebuild fast).
//! Without `done.json` nothing in the directory counts: the next call
//! starts that key over.

pub mod build;
pub mod source;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Kind, Result};
use crate::series::Series;
use crate::{fsutil, hosttool, progress};

/// Changes when what the build does changes its output.
/// 2: the loader and libc alone (`make lib`), Debian's glibc for the rest.
pub(crate) const RECIPE: &str = "bootlink glibc build 2";
/// The dynamic loader's name in `prefix/lib`.
pub(crate) const LD_SO: &str = "ld-linux-x86-64.so.2";
/// Written last into a key's directory: the build is complete.
const DONE: &str = "done.json";

#[derive(Debug, Clone)]
pub struct Options {
    /// The directory with the `series` file and its patches.
    pub series: PathBuf,
    /// make -j.
    pub jobs: usize,
    /// bootlink's cache (the build goes to `<cache>/glibc/`).
    pub cache: PathBuf,
}

impl Options {
    /// The repository's `glibc/patches`, `jobs` = the number of CPUs, the
    /// usual cache (`$BOOTLINK_CACHE` or `~/.cache/bootlink`).
    pub fn defaults() -> Options {
        Options {
            series: crate::fsutil::source_tree().join("glibc").join("patches"),
            jobs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
            cache: fsutil::cache_dir(),
        }
    }
}

/// A finished build, what `bootlink glibc build` prints (`--json`: this).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The cache key (hex), the name of the build's directory.
    pub key: String,
    /// The version of Debian's glibc built (the installed libc6's).
    pub debian_version: String,
    /// The install prefix: `<cache>/glibc/<key>/prefix`.
    pub prefix: PathBuf,
    /// `prefix/lib/ld-linux-x86-64.so.2`.
    pub ld_so: PathBuf,
    /// `prefix/lib`, where libc.so.6 and the other libraries are.
    pub libdir: PathBuf,
    /// Found complete in the cache: nothing was built.
    pub from_cache: bool,
    /// bootlink's patches applied on top of Debian's, in order.
    pub patches: Vec<String>,
    /// Seconds this call took.
    pub seconds: f64,
    /// Seconds the build took when it was made (a cache hit reports the
    /// original build's).
    #[serde(default)]
    pub build_seconds: f64,
}

impl Report {}

impl crate::report::Report for Report {
    /// What `bootlink glibc build` prints: one `name value` line per field.
    fn render(&self) -> String {
        let patches = if self.patches.is_empty() { "(none)".to_string() } else { self.patches.join(" ") };
        format!(
            "key             {}\ndebian_version  {}\nprefix          {}\nld_so           {}\nlibdir          {}\n\
             from_cache      {}\npatches         {patches}\nseconds         {:.1}\nbuild_seconds   {:.1}\n",
            self.key,
            self.debian_version,
            self.prefix.display(),
            self.ld_so.display(),
            self.libdir.display(),
            self.from_cache,
            self.seconds,
            self.build_seconds
        )
    }
}

/// The cache key: the recipe and `configparms`, the Debian version and its
/// `.dsc` (which names the tarballs' checksums), every patch's diff in
/// series order (not its message: a reworded patch builds nothing new),
/// and the configure arguments with the prefix left out (it is made from
/// the key).
pub(crate) fn cache_key(version: &str, dsc: &[u8], series: &Series) -> String {
    let mut h = crate::series::KeyHash::new();
    h.field("recipe", RECIPE.as_bytes());
    h.field("configparms", build::CONFIGPARMS.as_bytes());
    h.field("version", version.as_bytes());
    h.field("dsc", dsc);
    for p in &series.patches {
        h.field("diff", p.diff());
    }
    for a in build::configure_args(build::PREFIX_PLACEHOLDER, version) {
        h.field("configure", a.as_bytes());
    }
    h.finish()
}

/// The complete build in `keydir`, if there is one: its `done.json` and
/// installed prefix as sealed ([`crate::cache`]) when it was finished; a
/// damaged one is built again.
fn done(keydir: &Path, key: &str) -> Option<Report> {
    if !crate::cache::intact(keydir, "the glibc build") {
        return None;
    }
    let b: Report = serde_json::from_slice(&fsutil::read_input(&keydir.join(DONE), 1 << 20).ok()?).ok()?;
    (b.key == key && b.ld_so.is_file() && b.libdir.join("libc.so.6").is_file()).then_some(b)
}

/// What a finished build's seal covers: its record and the installed
/// prefix but `etc/` (the patched loader's own files, such as its default
/// DDLink cache, are written there later).
fn sealed_part(rel: &Path) -> Option<crate::cache::Check> {
    (rel == Path::new(DONE) || (rel.starts_with("prefix") && !rel.starts_with("prefix/etc")))
        .then_some(crate::cache::Check::Content)
}

/// Build (or find in the cache) Debian's glibc with the series.
pub fn run(opts: &Options) -> Result<Report> {
    crate::buildlog::timed(|| "glibc".to_string(), || build_or_find(opts))
}

fn build_or_find(opts: &Options) -> Result<Report> {
    let t0 = Instant::now();
    let series = Series::read(&opts.series)?;
    let cache = std::path::absolute(&opts.cache).map_err(|e| Error::io(&opts.cache, e))?;
    let glibc = cache.join("glibc");
    let version = source::installed_version()?;
    // The .dsc alone decides the key: a cache hit needs nothing else.
    let mut dsc = glibc.join("dl").join(source::dsc_name(&version));
    if !dsc.is_file() {
        dsc = source::download(&glibc, &version)?;
    }
    let dsc_bytes = std::fs::read(&dsc).map_err(|e| Error::io(&dsc, e))?;
    let key = cache_key(&version, &dsc_bytes, &series);
    let keydir = glibc.join(&key);
    let hit = |mut b: Report| {
        b.from_cache = true;
        b.seconds = t0.elapsed().as_secs_f64();
        b
    };
    if let Some(b) = done(&keydir, &key) {
        return Ok(hit(b));
    }
    std::fs::create_dir_all(&keydir).map_err(|e| Error::io(&keydir, e))?;
    let lock_path = keydir.join(".lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    if lock.try_lock().is_err() {
        progress::status(&format!("waiting for another build of glibc {key}"));
        lock.lock().map_err(|e| Error::io(&lock_path, e))?;
    }
    // Another process may have finished it while we waited.
    if let Some(b) = done(&keydir, &key) {
        return Ok(hit(b));
    }
    let prefix = keydir.join("prefix");
    if prefix.to_string_lossy().contains(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == '$') {
        return Err(Error::file(
            Kind::Unsupported,
            &prefix,
            "glibc's makefiles cannot install into a path with spaces, quotes or `$` (set BOOTLINK_CACHE)",
        ));
    }
    crate::buildlog::failed_earlier("glibc", &key)?;
    // Whatever an unfinished build left (we hold the lock): not complete, gone.
    start_over(&keydir)?;
    source::download(&glibc, &version)?;
    let src = source::prepare(&keydir, &dsc, &series, &version)?;
    build::ensure_tools()?;
    let log = keydir.join("build.log");
    std::fs::write(&log, format!("bootlink glibc build {key}: Debian glibc {version}\n"))
        .map_err(|e| Error::io(&log, e))?;
    let builddir = build::fresh_build_dir(&keydir.join("build"))?;
    let ccache_dir = cache.join("ccache-glibc");
    let env = build::Env {
        src: &src,
        build: &builddir,
        log: &log,
        jobs: opts.jobs,
        ccache_dir: hosttool::exists("ccache").then_some(ccache_dir.as_path()),
        ccache_base: &keydir,
        lock: &lock,
    };
    let configure = build::configure_args(&prefix.to_string_lossy(), &version);
    progress::status(&format!("building glibc {version} in {} (log: {})", builddir.display(), log.display()));
    crate::buildlog::remember("glibc", &key, build::build_and_install(&env, &configure, &prefix))?;
    let libdir = prefix.join("lib");
    let built = Report {
        key: key.clone(),
        debian_version: version,
        ld_so: libdir.join(LD_SO),
        libdir,
        prefix,
        from_cache: false,
        patches: series.patches.iter().map(|p| p.name.clone()).collect(),
        seconds: 0.0,
        build_seconds: t0.elapsed().as_secs_f64(),
    };
    let json = serde_json::to_vec_pretty(&built).expect("serializable");
    fsutil::write_atomic(&keydir.join(DONE), &json)?;
    // The objects (over 1 GB) and the tree: ccache and the download make
    // them again quickly.
    build::remove_tree(&builddir)?;
    build::remove_tree(&src)?;
    crate::cache::seal_tree(&keydir, sealed_part)?;
    Ok(Report { seconds: t0.elapsed().as_secs_f64(), ..built })
}

/// Remove what an unfinished build of this key left: a marker that no
/// longer holds, a prefix, temporaries, the build directory. The unpacked
/// and patched source stays if it was complete (it depends only on the key).
fn start_over(keydir: &Path) -> Result<()> {
    let _ = std::fs::remove_file(keydir.join(crate::cache::SEAL));
    let _ = std::fs::remove_file(keydir.join(DONE));
    build::remove_tree(&keydir.join("prefix"))?;
    build::remove_tree(&keydir.join("build"))?;
    let rd = std::fs::read_dir(keydir).map_err(|e| Error::io(keydir, e))?;
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".src-") || name.starts_with(".install-") {
            build::remove_tree(&e.path())?;
        }
    }
    fsutil::remove_stale_temps(keydir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(dir: &Path, patches: &[(&str, &str)]) -> Series {
        crate::series::write_for_test(dir, patches)
    }

    const P: &str = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n";
    const Q: &str = "--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n";

    #[test]
    fn the_key_follows_content() {
        let d = tempfile::tempdir().unwrap();
        let empty = series(d.path(), &[]);
        let k0 = cache_key("2.36-9", b"dsc", &empty);
        assert_eq!(k0.len(), 20);
        assert_eq!(k0, cache_key("2.36-9", b"dsc", &empty), "stable");
        assert_ne!(k0, cache_key("2.36-10", b"dsc", &empty), "version");
        assert_ne!(k0, cache_key("2.36-9", b"dsc2", &empty), "dsc");
        let pq = series(d.path(), &[("p.patch", P), ("q.patch", Q)]);
        let kpq = cache_key("2.36-9", b"dsc", &pq);
        assert_ne!(k0, kpq, "a patch");
        let qp = series(d.path(), &[("q.patch", Q), ("p.patch", P)]);
        assert_ne!(kpq, cache_key("2.36-9", b"dsc", &qp), "the order");
        // A reworded message, or a renamed file: the same diff, the same build.
        let reworded = series(d.path(), &[("p.patch", &format!("Why, remeasured.\n---\n{P}")), ("q2.patch", Q)]);
        assert_eq!(kpq, cache_key("2.36-9", b"dsc", &reworded));
    }
}
