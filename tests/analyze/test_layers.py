"""scripts/check-layers, the agent's include-graph check (`make
check-layers`, run by `make test`).

    layers:tree        the tree as it is passes
    layers:violations  a temporary copy of src/agent with one deliberate
                       violation at a time fails, naming the file and the
                       header: a layer-1 file including a layer-3 header;
                       an agent file including the CLI's analyze/; two
                       files of one layer including each other's headers
                       (a circle); a new file in no layer. The untouched
                       copy passes, so a failure is the violation's.
    layers:comments    scripts/check-comments (also run by `make
                       check-layers`): the tree passes; a copy of
                       src/agent/triggers.c whose comment names
                       agent/gone.c, and one naming bare gone_timer.c,
                       each fail naming the file, line and name; the
                       untouched copy passes
"""
import os
import shutil
import sys
import tempfile

import run_tests as rt
from run_tests import Failure

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "check-layers")


def check(src):
    rc, out, err = rt.run([sys.executable, SCRIPT, src])
    return rc, (out + err).decode("utf-8", "replace")


def add_line(path, line):
    """Adds line after the file's first #include of agent/agent.h."""
    with open(path) as f:
        text = f.read()
    mark = '#include "agent/agent.h"\n'
    if mark not in text:
        raise Failure("%s has no '%s'" % (path, mark.strip()))
    with open(path, "w") as f:
        f.write(text.replace(mark, mark + line + "\n", 1))


def test_tree(suite):
    rc, out = check(os.path.join(ROOT, "src"))
    if rc != 0:
        return ["check-layers fails on the tree (rc %d):\n%s" % (rc, out)], []
    return [], [out.strip()]


# (what, [(file, line to add) or (new file, None)], words the failure names)
VIOLATIONS = [
    ("layer 1 includes layer 3", [("table.c", '#include "agent/lifecycle.h"')],
     ["src/agent/table.c", "agent/lifecycle.h", "above"]),
    ("agent includes analyze/", [("os.c", '#include "analyze/profile.h"')],
     ["src/agent/os.c", "analyze/profile.h"]),
    ("a circle within layer 1", [("counters.c", '#include "agent/sample.h"'),
                                 ("sample.c", '#include "agent/counters.h"')],
     ["circle", "counters", "sample"]),
    ("a file in no layer", [("newthing.c", None)], ["src/agent/newthing.c", "no layer"]),
]


def test_violations(suite):
    problems, details = [], []
    with tempfile.TemporaryDirectory(prefix="check-layers-") as tmp:
        clean = os.path.join(tmp, "clean")
        shutil.copytree(os.path.join(ROOT, "src", "agent"), os.path.join(clean, "agent"))
        rc, out = check(clean)
        if rc != 0:
            return ["the untouched copy fails (rc %d):\n%s" % (rc, out)], []
        for i, (what, edits, words) in enumerate(VIOLATIONS):
            src = os.path.join(tmp, "v%d" % i)
            shutil.copytree(os.path.join(clean, "agent"), os.path.join(src, "agent"))
            for name, line in edits:
                path = os.path.join(src, "agent", name)
                if line is None:
                    with open(path, "w") as f:
                        f.write('#include "agent/agent.h"\n')
                else:
                    add_line(path, line)
            rc, out = check(src)
            if rc != 1:
                problems.append("%s: check-layers exits %d, not 1:\n%s" % (what, rc, out))
                continue
            missing = [w for w in words if w not in out]
            if missing:
                problems.append("%s: the failure does not name %s:\n%s" % (what, missing, out))
            details.append("%s: %s" % (what, out.strip().splitlines()[0]))
    return problems, details


COMMENTS = os.path.join(ROOT, "scripts", "check-comments")


def test_comments(suite):
    problems, details = [], []
    rc, out, err = rt.run([sys.executable, COMMENTS, ROOT])
    out = (out + err).decode("utf-8", "replace")
    if rc != 0:
        problems.append("check-comments fails on the tree (rc %d):\n%s" % (rc, out))
    details.append(out.strip())
    with open(os.path.join(ROOT, "src", "agent", "triggers.c")) as f:
        text = f.read()
    with tempfile.TemporaryDirectory(prefix="check-comments-") as tmp:
        for what, comment, name in (("untouched", None, None),
                                    ("a path", "/* the timer lives in agent/gone.c */", "agent/gone.c"),
                                    ("a bare name", "/* see gone_timer.c */", "gone_timer.c")):
            path = os.path.join(tmp, "triggers.c")
            lines = text.split("\n")
            if comment:
                lines.insert(2, comment)
            with open(path, "w") as f:
                f.write("\n".join(lines))
            rc, out, err = rt.run([sys.executable, COMMENTS, ROOT, path])
            out = (out + err).decode("utf-8", "replace")
            details.append("%s: rc %d: %s" % (what, rc, out.strip()))
            if comment is None:
                if rc != 0:
                    problems.append("the untouched copy fails (rc %d): %s" % (rc, out))
            elif rc != 1 or "triggers.c:3: names '%s'" % name not in out:
                problems.append("%s: rc %d, expected 1 naming triggers.c:3 and %s: %s" %
                                (what, rc, name, out))
    return problems, details


def collect(suite):
    return [("layers:tree", lambda: test_tree(suite)),
            ("layers:violations", lambda: test_violations(suite)),
            ("layers:comments", lambda: test_comments(suite))]
