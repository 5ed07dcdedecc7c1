//! DDLink's commands as requests: each takes the paths a user names and
//! returns a serializable report; the CLI only maps its arguments here.

use std::path::PathBuf;

use serde::Serialize;

use crate::ddlink::measure::{self, ProgramResult};
use crate::ddlink::prelink::PrelinkReport;
use crate::ddlink::record::Record;
use crate::ddlink::run::Program;
use crate::ddlink::write::{self, PrelinkTo, WriteOptions, WriteReport};
use crate::error::Result;
use crate::fsutil;

impl Program {
    /// A program from its command line (path, then arguments), run with
    /// `overlay`'s images in place when given.
    pub fn from_words(words: Vec<String>, overlay: Option<PathBuf>) -> Program {
        let mut it = words.into_iter();
        let path = PathBuf::from(it.next().unwrap_or_default());
        Program { path, args: it.collect(), overlay }
    }
}

/// `ddlink write`: a record turned into the cache the loader reads.
#[derive(Debug, Clone)]
pub struct CacheRequest {
    /// The patched ld.so that recorded.
    pub loader: PathBuf,
    /// The record from `ddlink profile`.
    pub record: PathBuf,
    /// The program the record is of.
    pub program: PathBuf,
    /// Where the cache goes.
    pub output: PathBuf,
    /// Relocation Skip Mode: the prelinked images' directory, and the load
    /// address of the first image (None: drawn at random for this build).
    pub prelink: Option<PathBuf>,
    pub base: Option<u64>,
    /// Identify files by name, size, mtime and build ID.
    pub portable: bool,
}

/// What [`write_cache`] wrote (fields in the order `--json` has always printed).
#[derive(Debug, Serialize)]
pub struct CacheReport {
    pub cache: WriteReport,
    pub prelink: Option<PrelinkReport>,
    /// The cache file written (named in the text; the JSON has always named
    /// it by the request).
    #[serde(skip)]
    pub output: PathBuf,
}

impl crate::report::Report for CacheReport {
    fn render(&self) -> String {
        let mut s = self.cache.render(&self.output);
        if let Some(p) = &self.prelink {
            s.push_str(&p.render());
        }
        s
    }
}

pub fn write_cache(req: &CacheRequest) -> Result<CacheReport> {
    fsutil::check_outputs(&[&req.record, &req.loader, &req.program], &[fsutil::Planned::new(&req.output)])?;
    let rec = Record::read(&req.record)?;
    let opts = WriteOptions {
        prelink: match &req.prelink {
            Some(dir) => Some(PrelinkTo {
                dir: dir.clone(),
                base: req.base.map_or_else(crate::ddlink::prelink::random_base, Ok)?,
            }),
            None => None,
        },
        portable: req.portable,
    };
    // A binding the files do not have is the record's error: name it.
    let (cache, prelink) =
        write::write(&rec, &req.loader, &req.program, &req.output, &opts).map_err(|e| e.at(&req.record))?;
    Ok(CacheReport { cache, prelink, output: req.output.clone() })
}

/// `ddlink measure`: startup under Debian's loader, the patched one without
/// a cache, with the cache, and (with `skip`) in Relocation Skip Mode.
#[derive(Debug, Clone)]
pub struct MeasureRequest {
    /// The patched ld.so.
    pub loader: PathBuf,
    pub cache: PathBuf,
    /// Debian's loader, the baseline.
    pub stock: PathBuf,
    /// Runs per mode (at least 1).
    pub runs: usize,
    /// LD_BIND_NOW=1 in every mode.
    pub bind_now: bool,
    /// Skip Mode's cache and the directory of its prelinked images.
    pub skip: Option<(PathBuf, PathBuf)>,
    /// Also write the result as JSON here (atomically).
    pub output: Option<PathBuf>,
    pub program: Program,
}

pub fn measure(req: &MeasureRequest) -> Result<ProgramResult> {
    if let Some(out) = &req.output {
        let mut read = vec![req.loader.as_path(), &req.cache, &req.stock, &req.program.path];
        read.extend(req.skip.as_ref().map(|(cache, _)| cache.as_path()));
        fsutil::check_outputs(&read, &[fsutil::Planned::new(out)])?;
    }
    // A damaged cache would be measured as "the loader did not use the
    // cache" after every run of every mode: refuse it first, in one line.
    crate::ddlink::run::read_cache(&req.cache)?;
    if let Some((cache, _)) = &req.skip {
        crate::ddlink::run::read_cache(cache)?;
    }
    let mut modes = measure::standard_modes(&req.stock, &req.loader, &req.cache);
    if let Some((cache, images)) = &req.skip {
        modes.push(measure::skip_mode(&req.loader, cache, images));
    }
    if req.bind_now {
        for m in &mut modes {
            m.env.push(("LD_BIND_NOW".into(), "1".into()));
        }
    }
    let result = measure::measure(&req.program, &modes, req.runs.max(1))?;
    if let Some(out) = &req.output {
        let text = serde_json::to_vec_pretty(&result).expect("serializable");
        fsutil::write_atomic(out, &text)?;
    }
    Ok(result)
}
