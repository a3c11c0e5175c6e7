"""scripts/check-layers, the include-graph check of the whole tree
(`make check-layers`, run by `make test`).

    layers:tree        the tree as it is passes
    layers:violations  a temporary copy of src/ (and the Makefile, which
                       says what the agent links) with one deliberate
                       violation at a time fails, naming the file and the
                       header. The agent: a layer-1 file including a
                       layer-3 header; an agent file including the CLI's
                       analyze/; two files of one layer including each
                       other's headers (a circle); a new file in no layer.
                       The CLI side (format < symbolize < analyze < render
                       < control < cli): render including a command's
                       header (cli/cli.h); format including analyze;
                       control including cli/cli.h; a format/ file linked
                       into the agent without banned.h; a command file
                       calling a function another command file defines; a
                       directory in no layer; a command including
                       control/live.h, a header of the layer's own. The untouched copy passes,
                       so a failure is the violation's.
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
    """Adds line after the file's first #include of agent/agent.h, or in
    a file of the CLI side after its first #include."""
    with open(path) as f:
        text = f.read()
    mark = '#include "agent/agent.h"\n'
    if "/agent/" not in path:
        lines = text.split("\n")
        first = [l for l in lines if l.startswith("#include")]
        mark = first[0] + "\n" if first else None
    if not mark or mark not in text:
        raise Failure("%s has no '%s'" % (path, mark and mark.strip()))
    with open(path, "w") as f:
        f.write(text.replace(mark, mark + line + "\n", 1))


def drop_line(path, line):
    """Removes line (without its newline) from the file."""
    with open(path) as f:
        text = f.read()
    if line + "\n" not in text:
        raise Failure("%s has no '%s'" % (path, line))
    with open(path, "w") as f:
        f.write(text.replace(line + "\n", "", 1))


def test_tree(suite):
    rc, out = check(os.path.join(ROOT, "src"))
    if rc != 0:
        return ["check-layers fails on the tree (rc %d):\n%s" % (rc, out)], []
    return [], [out.strip()]


BANNED = '#include "agent/banned.h"   /* linked into the agent: held to its rules */'

# (what, [(file under src/, line to add) or (new file, None) or (file,
# ("drop", line))], words the failure names)
VIOLATIONS = [
    ("layer 1 includes layer 3", [("agent/table.c", '#include "agent/lifecycle.h"')],
     ["src/agent/table.c", "agent/lifecycle.h", "above"]),
    ("agent includes analyze/", [("agent/os.c", '#include "analyze/profile.h"')],
     ["src/agent/os.c", "analyze/profile.h"]),
    ("a circle within layer 1", [("agent/counters.c", '#include "agent/sample.h"'),
                                 ("agent/sample.c", '#include "agent/counters.h"')],
     ["circle", "counters", "sample"]),
    ("a file in no layer", [("agent/newthing.c", None)], ["src/agent/newthing.c", "no layer"]),
    ("render includes a command's header", [("render/text.c", '#include "cli/cli.h"')],
     ["src/render/text.c", "cli/cli.h", "above its own layer (render)"]),
    ("format includes analyze", [("format/heapdump.c", '#include "analyze/profile.h"')],
     ["src/format/heapdump.c", "analyze/profile.h", "above its own layer (format)"]),
    ("control includes a command's header", [("control/http.c", '#include "cli/cli.h"')],
     ["src/control/http.c", "cli/cli.h", "above its own layer (control)"]),
    ("an agent-linked format file without banned.h", [("format/options.c", ("drop", BANNED))],
     ["src/format/options.c", "agent/banned.h", "agent's rules"]),
    ("a command calls another command's function",
     [("cli/flame.c", "int cli_flame_helper(void)\n{\n\treturn 0;\n}"),
      ("cli/top.c", "static int top_uses(void) { return cli_flame_helper(); }")],
     ["src/cli/top.c", "cli_flame_helper", "cli/flame.c"]),
    ("a directory in no layer", [("util/x.c", None)], ["src/util/x.c", "no layer"]),
    ("a command includes the control layer's own header",
     [("cli/serve.c", '#include "control/live.h"')],
     ["src/cli/serve.c", "control/live.h", "layer's own"]),
]


def test_violations(suite):
    problems, details = [], []
    with tempfile.TemporaryDirectory(prefix="check-layers-") as tmp:
        def copy(to):
            os.makedirs(to)
            shutil.copytree(os.path.join(ROOT, "src"), os.path.join(to, "src"),
                            ignore=shutil.ignore_patterns("*.o", "*.d"))
            shutil.copy(os.path.join(ROOT, "Makefile"), os.path.join(to, "Makefile"))
            return os.path.join(to, "src")
        clean = copy(os.path.join(tmp, "clean"))
        rc, out = check(clean)
        if rc != 0:
            return ["the untouched copy fails (rc %d):\n%s" % (rc, out)], []
        for i, (what, edits, words) in enumerate(VIOLATIONS):
            src = copy(os.path.join(tmp, "v%d" % i))
            for name, line in edits:
                path = os.path.join(src, name)
                if line is None:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "w") as f:
                        f.write('#include "agent/agent.h"\n')
                elif isinstance(line, tuple):
                    drop_line(path, line[1])
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
