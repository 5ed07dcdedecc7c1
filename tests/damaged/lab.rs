#![allow(dead_code)]
//! The damaged-input generator for the lab's inputs: run records
//! (`run.json`, read by `bootlink chart`), kernel logs (`chart` of a dmesg),
//! LAVA jobs directories (`bootlink-lava.json`) and LAVA job logs (`lava
//! import`). From a valid input (made in the test or checked in) and a
//! seed, files damaged one way each, by class, marked `invalid` where the
//! damage must be refused. Bit flips, and cuts that may leave a valid file
//! (a kernel log cut short is still a log), are unmarked: they must only
//! not panic, hang or blow up. It reads the formats by hand (JSON through
//! serde_json's tree, logs as lines), not through bootlink's readers.

use bootlink::rng::Rng;

use super::generate::Damaged;
use super::records::NOT_REGULAR;

fn damaged(name: String, class: &'static str, bytes: Vec<u8>, invalid: bool, format: &str) -> Damaged {
    Damaged { name, class, bytes, invalid, reason: reason(format, class) }
}

/// The reason a refusal of a `format` ("run", "log", "jobs" or
/// "lava-log") damaged by `class` gives, per class with why.
pub fn reason(format: &str, class: &str) -> &'static [&'static str] {
    match (format, class) {
        // Bit flips and hostile numbers may leave a valid file: unmarked.
        (_, "bit-flips" | "huge-counts") => &[],
        // A FIFO, a directory or a link to /dev/zero in its place (a
        // directory given to `chart` is read as a run directory).
        ("run" | "log", NOT_REGULAR) => &["not a regular file", "a directory without run.json"],
        (_, NOT_REGULAR) => &["not a regular file"],
        // Cut: JSON ends early; a LAVA log without its job's result (or
        // cut inside a record), or cut before /init's output ended.
        ("run" | "jobs", "truncated") => &["truncated", "the file is empty", "neither a run.json"],
        ("lava-log", "truncated") => &["truncated", "the file is empty"],
        // Cut inside the first printk time: no line of a kernel log left.
        ("log", "truncated") => &["neither a run.json nor a kernel log", "the file is empty"],
        // Random bytes: neither JSON nor a kernel log nor a LAVA log.
        ("run" | "log", "random-bytes") => {
            &["neither a run.json nor a kernel log", "the file is empty", "not a bootlink run.json"]
        }
        ("jobs", "random-bytes") => &["not a bootlink-lava.json"],
        ("lava-log", "random-bytes") => {
            &["not a LAVA log record", "neither a LAVA job log nor a console of these jobs", "not a text file"]
        }
        ("log", "empty") => &["the file is empty"],
        // Another format's number.
        ("run", "newer-format") => &["is newer than this bootlink reads"],
        ("jobs", "newer-format") => &["bootlink-lava.json format "],
        // A field of another type, or a required one gone.
        ("run" | "jobs", "wrong-type" | "missing-field") => {
            &["invalid type", "missing field", "invalid value", "unknown variant"]
        }
        // A time far past any boot (1e300 µs, -1e20 µs).
        ("run", "time-out-of-range") => &["past any boot's times"],
        // A kernel log holding two boots (the machine rebooted).
        ("log", "two-boots") => &["holds 2 kernel boots"],
        // The jobs' run lists no variant, or other ones.
        ("jobs", "run-without-variants") => &["the run lists 0 variant(s), the jobs "],
        ("jobs", "no-variants") => &["no variants"],
        ("jobs", "variants-differ") => &["in the jobs and * in the run", "the run lists "],
        ("jobs", "tag-twice") => &["is given to two variants"],
        ("jobs", "bad-tag") => &["marker tag "],
        // A log whose boot repeats: /init began twice, or printed two
        // kernels' logs.
        ("lava-log", "boot-repeats") => &["the boot repeats"],
        // The job's result is a failure.
        ("lava-log", "job-failed") => &["the LAVA job failed"],
        // A line that is no LAVA record, inside the log.
        ("lava-log", "line-not-a-record") => &["not a LAVA log record"],
        _ => panic!("no reason for the {format} damage class {class}"),
    }
}

/// Bit flips, a cut anywhere (marked when the cut is before `valid_to`),
/// random bytes and the non-regular paths.
fn common(
    format: &str,
    name: &dyn Fn(&str, usize) -> String,
    base: &[u8],
    valid_to: usize,
    rng: &mut Rng,
    k: usize,
    out: &mut Vec<Damaged>,
) {
    let mut d = base.to_vec();
    for _ in 0..1 + rng.below(8) {
        let i = rng.below(d.len());
        d[i] ^= 1 << rng.below(8);
    }
    out.push(damaged(name("bit-flips", k), "bit-flips", d, false, format));
    let cut = rng.below(base.len());
    out.push(damaged(name("truncated", k), "truncated", base[..cut].to_vec(), cut < valid_to, format));
    let n = [1 + rng.below(64), 4096 + rng.below(1 << 16)][k % 2];
    // Not starting with `{` or whitespace: random bytes, not JSON's first byte.
    let junk: Vec<u8> = (0..n)
        .map(|i| {
            loop {
                let b = rng.below(256) as u8;
                if i > 0 || (b != b'{' && !b.is_ascii_whitespace() && b != b'-') {
                    break b;
                }
            }
        })
        .collect();
    out.push(damaged(name("random-bytes", k), "random-bytes", junk, true, format));
    out.push(damaged(name(NOT_REGULAR, k), NOT_REGULAR, Vec::new(), true, format));
}

fn json(base: &str) -> serde_json::Value {
    serde_json::from_str(base).expect("the base is JSON")
}

fn bytes(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec_pretty(v).unwrap()
}

/// A random element of `v` (an array), mutable.
fn pick<'a>(v: &'a mut serde_json::Value, rng: &mut Rng) -> &'a mut serde_json::Value {
    let a = v.as_array_mut().expect("an array");
    let i = rng.below(a.len());
    &mut a[i]
}

pub const RUN_CLASSES: &[&str] = &[
    "bit-flips",
    "truncated",
    "random-bytes",
    NOT_REGULAR,
    "newer-format",
    "wrong-type",
    "missing-field",
    "time-out-of-range",
    "huge-counts",
];

/// Damaged copies of a run.json (one with variants, repetitions and
/// module loads with phases, as `lava import` or the lab writes it).
pub fn runs(base: &str, rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let name = |class: &str, k: usize| format!("{class}-{k}-run.json");
    let mut out = Vec::new();
    let b = json(base);
    for k in 0..per_class {
        // A cut anywhere before the last `}` leaves no JSON.
        common("run", &name, base.as_bytes(), base.trim_end().len(), rng, k, &mut out);

        let mut v = b.clone();
        v["format"] = [3, 99, u32::MAX as u64][rng.below(3)].into();
        out.push(damaged(name("newer-format", k), "newer-format", bytes(&v), true, "run"));

        let mut v = b.clone();
        let rep = pick(&mut pick(&mut v["variants"], rng)["repetitions"], rng);
        match rng.below(4) {
            0 => rep["modules"] = "fat vfat".into(),
            1 => pick(&mut rep["modules"], rng)["total_us"] = "12 ms".into(),
            2 => pick(&mut rep["initcalls"], rng)["start_us"] = serde_json::json!([1, 2]),
            _ => v["variants"] = serde_json::json!({"stock": []}),
        }
        out.push(damaged(name("wrong-type", k), "wrong-type", bytes(&v), true, "run"));

        let mut v = b.clone();
        match rng.below(3) {
            0 => {
                v.as_object_mut().unwrap().remove("variants");
            }
            1 => {
                let rep = pick(&mut pick(&mut v["variants"], rng)["repetitions"], rng);
                rep.as_object_mut().unwrap().remove("modules");
            }
            _ => {
                let rep = pick(&mut pick(&mut v["variants"], rng)["repetitions"], rng);
                pick(&mut rep["modules"], rng).as_object_mut().unwrap().remove("name");
            }
        }
        out.push(damaged(name("missing-field", k), "missing-field", bytes(&v), true, "run"));

        let mut v = b.clone();
        let t: f64 = [1e300, -1e20, 2e12, 1.7e308][rng.below(4)];
        let rep = pick(&mut pick(&mut v["variants"], rng)["repetitions"], rng);
        match rng.below(4) {
            0 => pick(&mut rep["modules"], rng)["start_us"] = t.into(),
            1 => pick(&mut rep["modules"], rng)["total_us"] = t.into(),
            2 => pick(&mut pick(&mut rep["modules"], rng)["phases"], rng)["duration_us"] = t.into(),
            _ => pick(&mut rep["initcalls"], rng)["duration_us"] = t.into(),
        }
        out.push(damaged(name("time-out-of-range", k), "time-out-of-range", bytes(&v), true, "run"));

        // Counts and indexes as large as their types hold: a worker
        // number of 2^32 - 1 (lanes drawn per worker number), lookups and
        // sizes of 2^64 - 1. They must neither hang nor take memory for
        // the numbers rather than the file.
        let mut v = b.clone();
        let rep = pick(&mut pick(&mut v["variants"], rng)["repetitions"], rng);
        for m in rep["modules"].as_array_mut().unwrap() {
            m["worker"] = (u32::MAX - rng.below(4) as u32).into();
            m["lookups"] = u64::MAX.into();
            m["size"] = u64::MAX.into();
        }
        out.push(damaged(name("huge-counts", k), "huge-counts", bytes(&v), false, "run"));
    }
    out
}

pub const LOG_CLASSES: &[&str] = &["bit-flips", "truncated", "random-bytes", NOT_REGULAR, "empty", "two-boots"];

/// Damaged copies of a kernel log (dmesg with printk times and
/// `initcall_debug`).
pub fn kernel_logs(base: &str, rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let name = |class: &str, k: usize| format!("{class}-{k}-dmesg.log");
    let mut out = Vec::new();
    // A cut log is still a log: only a cut inside the first printk time
    // leaves none.
    let first_time = base.find(']').unwrap_or(0);
    for k in 0..per_class {
        common("log", &name, base.as_bytes(), first_time, rng, k, &mut out);
        let blank = ["", "\n", " \n\n"][rng.below(3)];
        out.push(damaged(name("empty", k), "empty", blank.as_bytes().to_vec(), true, "log"));
        // The machine rebooted: a second boot's log after the first's, or
        // its beginning anywhere in it.
        let lines: Vec<&str> = base.lines().collect();
        let version = lines.iter().position(|l| l.contains("] Linux version ")).expect("a `Linux version` line");
        let at = 1 + rng.below(lines.len() - 1);
        let second = lines[..version + 1 + rng.below(lines.len() - version)].join("\n");
        let t = format!("{}\n{second}\n{}\n", lines[..at].join("\n"), lines[at..].join("\n"));
        out.push(damaged(name("two-boots", k), "two-boots", t.into_bytes(), true, "log"));
    }
    out
}

pub const JOBS_CLASSES: &[&str] = &[
    "bit-flips",
    "truncated",
    "random-bytes",
    NOT_REGULAR,
    "newer-format",
    "wrong-type",
    "missing-field",
    "run-without-variants",
    "no-variants",
    "variants-differ",
    "tag-twice",
    "bad-tag",
];

/// Damaged copies of a jobs directory's `bootlink-lava.json` (two
/// variants or more), each named `bootlink-lava.json` (the runner puts
/// each in a directory of its own, given as `--jobs`).
pub fn jobs(base: &str, rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    const NAME: &str = "bootlink-lava.json";
    let name = |_: &str, _: usize| NAME.to_string();
    let mut out = Vec::new();
    let b = json(base);
    let mk = |class: &'static str, v: &serde_json::Value| damaged(NAME.into(), class, bytes(v), true, "jobs");
    for k in 0..per_class {
        common("jobs", &name, base.as_bytes(), base.trim_end().len(), rng, k, &mut out);

        let mut v = b.clone();
        v["format"] = [0, 2, 99][rng.below(3)].into();
        out.push(mk("newer-format", &v));

        let mut v = b.clone();
        match rng.below(3) {
            0 => v["variants"] = "stock".into(),
            1 => pick(&mut v["variants"], rng)["sizes"] = serde_json::json!({"fat": 1}),
            _ => v["boot_method"] = "floppy".into(),
        }
        out.push(mk("wrong-type", &v));

        let mut v = b.clone();
        let key = ["run", "variants", "device_type", "boot_method"][rng.below(4)];
        v.as_object_mut().unwrap().remove(key);
        out.push(mk("missing-field", &v));

        let mut v = b.clone();
        v["run"]["variants"] = serde_json::json!([]);
        out.push(mk("run-without-variants", &v));

        let mut v = b.clone();
        v["variants"] = serde_json::json!([]);
        if rng.below(2) == 0 {
            v["run"]["variants"] = serde_json::json!([]);
        }
        out.push(mk("no-variants", &v));

        let mut v = b.clone();
        match rng.below(2) {
            0 => pick(&mut v["run"]["variants"], rng)["name"] = "other".into(),
            _ => {
                v["run"]["variants"].as_array_mut().unwrap().pop();
            }
        }
        out.push(mk("variants-differ", &v));

        let mut v = b.clone();
        let tag = v["variants"][0]["tag"].clone();
        let n = v["variants"].as_array().unwrap().len();
        v["variants"][1 + rng.below(n - 1)]["tag"] = tag;
        out.push(mk("tag-twice", &v));

        let mut v = b.clone();
        pick(&mut v["variants"], rng)["tag"] = ["", "lava v0", "../x", "a===b", &"t".repeat(65)][rng.below(5)].into();
        out.push(mk("bad-tag", &v));
    }
    out
}

pub const LAVA_LOG_CLASSES: &[&str] =
    &["bit-flips", "truncated", "random-bytes", NOT_REGULAR, "boot-repeats", "job-failed", "line-not-a-record"];

/// Damaged copies of a LAVA job log of a passed job (`lava-run`'s output,
/// one record a line) whose console holds one lab boot framed by its
/// markers.
pub fn lava_logs(base: &str, rng: &mut Rng, per_class: usize) -> Vec<Damaged> {
    let name = |class: &str, k: usize| format!("{class}-{k}.yaml");
    let mut out = Vec::new();
    let lines: Vec<&str> = base.lines().collect();
    let target = |l: &str| l.contains(r#""lvl": "target""#);
    let begin = lines.iter().position(|l| target(l) && l.contains("=== BOOTLINK BEGIN ")).expect("a begin marker");
    let end = lines.iter().position(|l| target(l) && l.contains("=== BOOTLINK END ")).expect("an end marker");
    let result = lines.iter().rposition(|l| l.contains(r#""case": "job""#)).expect("the job's result");
    // Any cut before the job's result line ends leaves no result.
    let valid_to: usize = lines[..=result].iter().map(|l| l.len() + 1).sum::<usize>() - 1;
    for k in 0..per_class {
        common("lava-log", &name, base.as_bytes(), valid_to, rng, k, &mut out);

        // The board rebooted: /init's output again (from its begin marker
        // on) after some of the first boot's, anywhere up to its end.
        let at = begin + 1 + rng.below(end - begin);
        let t: Vec<&str> = lines[..at].iter().chain(&lines[begin..]).copied().collect();
        out.push(damaged(
            name("boot-repeats", k),
            "boot-repeats",
            (t.join("\n") + "\n").into_bytes(),
            true,
            "lava-log",
        ));

        let t = base.replacen(
            r#""case": "job", "definition": "lava", "result": "pass""#,
            r#""case": "job", "definition": "lava", "result": "fail", "error_type": "Infrastructure""#,
            1,
        );
        assert_ne!(t, base, "the job's result line is not where the generator looks");
        out.push(damaged(name("job-failed", k), "job-failed", t.into_bytes(), true, "lava-log"));

        let at = 1 + rng.below(result - 1);
        let junk =
            ["[    0.000000] Linux version 6.1", "- just text", "{\"dt\": \"x\", \"lvl\": \"target\""][rng.below(3)];
        let t: Vec<&str> = lines[..at].iter().copied().chain([junk]).chain(lines[at..].iter().copied()).collect();
        out.push(damaged(
            name("line-not-a-record", k),
            "line-not-a-record",
            (t.join("\n") + "\n").into_bytes(),
            true,
            "lava-log",
        ));
    }
    out
}
