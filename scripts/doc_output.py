"""Imported by the scripts/*-table scripts: with --write-docs as the first
argument or BOOTLINK_WRITE_DOCS=1, what the script prints also goes into a
region of a docs page (scripts/doc-region) once the script has finished;
otherwise it only prints. Python's side of scripts/doc-output.sh."""
import io
import os
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
