"""The CLI's model and views, beyond their outputs:

    model:flame-js        src/render/flame.js (the flame graph's script,
                          embedded at build time) parses (node --check),
                          and the script in a flame SVG is that file's
                          bytes followed by the constants call, and parses
                          too
    model:unit-profile    the C unit test of the profile model
                          (tests/unit/test_profile.c) was built and runs

The golden tests (test_golden*.py) show that the views' outputs did not
change; these show where the pieces come from.
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_tests  # noqa: E402
from run_tests import Failure, Skip, run, short  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLAME_JS = os.path.join(ROOT, "src", "render", "flame.js")
GOLDEN = os.path.join(ROOT, "tests", "golden")


def node():
    n = shutil.which("node") or shutil.which("nodejs")
    if not n:
        raise Skip("node is not installed (scripts/install-deps --test)")
    return n


def node_check(path):
    rc, out, err = run([node(), "--check", path])
    if rc != 0:
        raise Failure("node --check %s: %s" % (path, short(err)))


def test_flame_js(suite):
    node_check(FLAME_JS)
    with open(FLAME_JS, "rb") as f:
        js = f.read()
    if not js.endswith(b"\n") or not js.startswith(b"(function (C) {"):
        raise Failure("flame.js is not one function expression ending in a newline")
    d = run_tests.fresh_dir(os.path.join(suite.build, "e2e", "analyze", "model", "flame-js"))
    svg = os.path.join(d, "flame.svg")
    rc, out, err = run([suite.heaptrail, "flame", "--binary-path", os.path.join(GOLDEN, "bin"),
                        "-o", svg, os.path.join(GOLDEN, "inputs", "heaptrail.heap")])
    if rc != 0:
        raise Failure("heaptrail flame: status %d: %s" % (rc, short(err)))
    with open(svg, "rb") as f:
        text = f.read()
    m = re.search(rb'<script type="text/ecmascript"><!\[CDATA\[\n(.*?)\]\]></script>', text,
                  re.S)
    if not m:
        raise Failure("no script in the flame graph")
    script = m.group(1)
    if not script.startswith(js[:-1] + b"({ pad: "):
        raise Failure("the flame graph's script is not flame.js followed by its constants")
    path = os.path.join(d, "embedded.js")
    with open(path, "wb") as f:
        f.write(script)
    node_check(path)
    return [], []


def test_unit_profile(suite):
    exe = os.path.join(suite.build, "tests", "test_profile")
    if not os.path.exists(exe):
        raise Failure("%s was not built (make unit)" % exe)
    rc, out, err = run([exe])
    if rc != 0:
        raise Failure("test_profile: status %d: %s" % (rc, short(out + err)))
    return [], []


def collect(suite):
    return [("model:flame-js", lambda: test_flame_js(suite)),
            ("model:unit-profile", lambda: test_unit_profile(suite))]
