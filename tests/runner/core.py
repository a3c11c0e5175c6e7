"""The Suite: one object per run holding the specs and the memoized
builds and runs that the tests share; its tests come from the mixins of
e2e.py, cli.py and prof.py."""

from .harness import *  # noqa: F401,F403
from .specs import *  # noqa: F401,F403
from .valgrind import *  # noqa: F401,F403
from .e2e import *  # noqa: F401,F403
from .cli import *  # noqa: F401,F403
from .prof import *  # noqa: F401,F403


# ---------------------------------------------------------------- suite

class Suite(E2E, Cli, Prof):
    def __init__(self, args):
        self.build = os.path.abspath(args.build)
        self.e2e = os.path.join(self.build, "e2e")
        self.heaptrail = os.path.join(self.build, "heaptrail")
        self.verbose = args.verbose
        self.use_cache = not args.no_cache
        self.cc = os.environ.get("CC", "cc")
        self.cxx = os.environ.get("CXX", "c++")
        self.specs = {s.name: s for s in load_specs()}
        self.builds = Once()
        self.bares = Once()
        self.vgs = Once()
        self.ht_runs = Once()
        self.exports = Once()
        self.tools = Once()
        self.syms = Once()

    def test_unit(self, path):
        rc, out, err = run([path], cwd=ROOT, timeout=300,
                           env=os.environ)
        text = out.decode("utf-8", "replace")
        bad = [l for l in text.split("\n") if l.startswith("not ok")]
        oks = [l for l in text.split("\n") if l.startswith("ok")]
        problems = []
        if rc != 0:
            problems.append("exit status %d" % rc)
        problems += bad[:5]
        if rc != 0 and not bad:
            problems.append(short(err) or "no output")
        if rc == 0 and not oks and not bad:
            problems.append("no \"ok\" line: no test ran")
        return problems, ["%d ok, %d not ok" % (len(oks), len(bad)), text]
