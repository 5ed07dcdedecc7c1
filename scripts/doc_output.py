"""Imported by the scripts/*-table scripts: with --write-docs as the first
argument or BOOTLINK_WRITE_DOCS=1, what the script prints also goes into a
region of a docs page (scripts/doc-region) once the script has finished;
otherwise it only prints. Python's side of scripts/doc-output.sh."""
import glob
import io
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Tee:
    def __init__(self, out):
        self.out, self.buf = out, io.StringIO()

    def write(self, s):
        self.buf.write(s)
        return self.out.write(s)

    def flush(self):
        self.out.flush()


def capture(doc, name):
    """Call first: returns finish(), to call once the tables are printed."""
    want = os.environ.get("BOOTLINK_WRITE_DOCS") == "1"
    if sys.argv[1:2] == ["--write-docs"]:
        want = True
        del sys.argv[1]
    if not want:
        return lambda: None
    tee = _Tee(sys.stdout)
    sys.stdout = tee

    def finish():
        sys.stdout = tee.out
        r = subprocess.run([os.path.join(ROOT, "scripts", "doc-region"), os.path.join(ROOT, doc), name],
                           input=tee.buf.getvalue(), text=True)
        if r.returncode != 0:
            sys.exit(1)  # doc-region said why, in one line

    return finish


# Which kernel a boot table's boots ran and whether KASLR was on, read from
# the lab's records (issue 45: every figure says both). One line, for every
# script that prints a table of guest boots.

def _cache():
    for var, tail in (("BOOTLINK_CACHE", ""), ("XDG_CACHE_HOME", "bootlink")):
        if os.environ.get(var):
            return os.path.join(os.environ[var], tail)
    return os.path.join(os.path.expanduser("~"), ".cache", "bootlink")


def _build_config(build):
    """A kernel build's config as build.json records it."""
    line = build.get("line", "?")
    arch = build.get("arch", "amd64")
    # the lab's fragment: lab.config on x86, its twin lab-ARCH.config elsewhere
    fragment = "lab.config" if arch in ("amd64", "x86_64") else f"lab-{arch}.config"
    if build.get("config_base") == "tinyconfig":
        what = f"the lab's tinyconfig-based config (kernel/{line}/configs/{fragment})"
    else:
        what = f"Debian's config (Debian's {os.path.basename(str(build.get('config_base', '')))} with kernel/{line}/configs/series.config)"
    flavours = build.get("flavours") or []
    return what + (f", flavour {'+'.join(flavours)}" if flavours else "")


def kernel_config(kernel):
    """What the kernel at path KERNEL was built with: Debian's own package
    (bootlink's cache keeps it as kernels/RELEASE/boot/), or a `bootlink
    kernel build` (its build.json beside it, or a copy of such a build's
    kernel: its config file equals the build's, byte for byte)."""
    if not str(kernel):
        return "a kernel whose config the records do not say"
    kernel = os.path.expanduser(str(kernel))
    if not os.path.isabs(kernel) and not os.path.exists(kernel):
        kernel = os.path.join(ROOT, kernel)  # the lab records paths as it was given them
    # An image a script made from a build (a hash manifest written into a
    # copy): KERNEL.made-from.json beside the file names the build and how.
    made = os.path.realpath(kernel) + ".made-from.json"
    if os.path.exists(made):
        with open(made) as f:
            made = json.load(f)
        return f"{kernel_config(made['kernel'])}, {made['how']}"
    d = os.path.dirname(kernel)
    parts = kernel.split(os.sep)
    if len(parts) >= 4 and parts[-2] == "boot" and parts[-4] == "kernels" and not parts[-3].startswith("build-"):
        return "Debian's own package"
    build = os.path.join(d, "build.json")
    if os.path.exists(build):
        with open(build) as f:
            return _build_config(json.load(f))
    # The lab's kernel:distro: its directory's kernel.json names the build.
    distro = os.path.join(d, "kernel.json")
    if os.path.exists(distro):
        with open(distro) as f:
            key = json.load(f).get("build_key", "")
        build = os.path.join(_cache(), "kernels", f"build-{key}", "build.json")
        if key and os.path.exists(build):
            with open(build) as f:
                return _build_config(json.load(f)) + ", Debian's modules signed with its key (kernel:distro)"
    configs = glob.glob(os.path.join(d, "config-*"))
    if len(configs) == 1:
        with open(configs[0], "rb") as f:
            mine = f.read()
        same = set()
        for b in sorted(glob.glob(os.path.join(_cache(), "kernels", "build-*", "build.json"))):
            with open(b) as f:
                build = json.load(f)
            try:
                with open(build.get("config") or "", "rb") as f:
                    if f.read() == mine:
                        same.add((_build_config(dict(build, flavours=[])), _build_config(build)))
            except OSError:
                continue
        if len({base for base, _ in same}) == 1:
            base, full = same.pop() if len(same) == 1 else (next(iter(same))[0], None)
            # Builds of one config but other flavours: the config does not tell which.
            return (full or base + ", its flavour not told by its config") + " (a copy of that build's kernel)"
    return "a kernel whose config the records do not say"


def _kaslr(cmdline, slides):
    if not cmdline.strip():
        return "KASLR not recorded (no command line in the record)"
    if "nokaslr" in cmdline.split():
        return "KASLR off (nokaslr)"
    moved = [s for s in slides if s]
    if slides and len(slides) == len([s for s in slides if s is not None]):
        return f"KASLR on (the kernel moved in {len(moved)} of {len(slides)} boots)"
    return "KASLR on"


def _join(groups):
    """'name, name: what; name: what.' from [(what, [names])]."""
    if len(groups) == 1 and len(groups[0][1]) > 1:
        return f"{groups[0][0]}, every variant"
    return "; ".join(f"{', '.join(names)}: {what}" for what, names in groups)


def _group(items):
    groups = []
    for name, what in items:
        for g in groups:
            if g[0] == what:
                if name not in g[1]:
                    g[1].append(name)
                break
        else:
            groups.append((what, [name]))
    return groups


def boot_line(runs, labels=None):
    """One line: each variant's kernel (config, release) and KASLR state,
    read from lab records (run.json paths or their parsed dicts), variants
    that share both named together; LABELS, one per run, name a run's
    variants where their own names would repeat across runs."""
    items = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            with open(run) as f:
                run = json.load(f)
        for v in run["variants"]:
            # a variant's own image (its hash list linked in) names the
            # kernel it was made from
            kernel = v.get("made_from") or v.get("kernel") or run.get("kernel") or ""
            release = v.get("kernel_release") or run.get("kernel_release") or "release not recorded"
            cmdline = v.get("cmdline") or run.get("cmdline", "")
            slides = [r.get("kaslr_slide") for r in v.get("repetitions", [])]
            name = v["name"] if labels is None else labels[i] if len(run["variants"]) == 1 else f"{labels[i]} {v['name']}"
            items.append((name, f"{release}, {kernel_config(kernel)}, {_kaslr(cmdline, slides)}"))
    return f"Kernel and KASLR (run.json): {_join(_group(items))}."


def boot_line_of_report(text):
    """The same line from the report `bootlink lab` printed (its variant
    lines: 'NAME  T modules on RELEASE (KERNEL); ...' and the 'KASLR ...'
    line under each), for a table whose run.json is no longer kept."""
    items, name = [], None
    for l in text.split("\n"):
        m = re.match(r"^  (\S+)\s+\S+ modules on (\S+) \((.+?)\);", l)
        if m:
            name, release, kernel = m.groups()
            items.append([name, f"{release}, {kernel_config(kernel)}", None])
            continue
        m = re.match(r"^\s+KASLR (on|off \(nokaslr\));", l)
        if m and items and items[-1][0] == name:
            items[-1][2] = f"KASLR {m.group(1)}"
    if not items or any(k is None for _, _, k in items):
        return None
    return f"Kernel and KASLR (the lab's report): {_join(_group([(n, f'{w}, {k}') for n, w, k in items]))}."


if __name__ == "__main__":
    # scripts/doc_output.py boot-line [LABEL=]RUN.json...: the line, for the
    # shell scripts (LABEL names the run's variants where runs share names).
    if sys.argv[1:2] != ["boot-line"] or len(sys.argv) < 3:
        print("usage: scripts/doc_output.py boot-line [LABEL=]RUN.json...", file=sys.stderr)
        sys.exit(2)
    args = [a.split("=", 1) if re.match(r"^[\w.+-]+=", a) else [None, a] for a in sys.argv[2:]]
    labels = [l for l, _ in args] if all(l for l, _ in args) else None
    for _, p in args:
        try:
            with open(p) as f:
                json.load(f)["variants"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"doc_output: {p}: no kernel and KASLR state to read ({e})", file=sys.stderr)
            sys.exit(1)
    print(boot_line([p for _, p in args], labels))
