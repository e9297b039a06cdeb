"""The examples that run as every node of a local cluster (scripts/local.sh, one output
shared by all the nodes) write each line in one write through their `say()`: print()
writes the newline separately, and under PYTHONUNBUFFERED another node's line lands
between (two servers' result lines glued into one, which a reader or a test then
misses). No print() is left in them, and `say()` itself, run by three processes at once
into one pipe, leaves every line whole."""

import ast
import os
import subprocess
import sys

from cluster import ROOT

EXAMPLES = [ROOT / "python" / "examples" / n for n in ("torch_ctr.py", "torch_fashion_mnist.py",
                                                        "fashion_mnist_numpy.py")]


def functions(path):
    tree = ast.parse(path.read_text())
    return tree, {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}


def test_cluster_examples_write_whole_lines():
    for path in EXAMPLES:
        tree, funcs = functions(path)
        assert "say" in funcs, f"{path.name} has no say()"
        prints = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "print"]
        assert not prints, f"{path.name}: print() at lines {prints}; write lines with say()"
        source = "import sys\n" + ast.unparse(funcs["say"]) + (
            "\nfor i in range(2000):\n    say(f'node {sys.argv[1]} line {i} ' + 'x' * 100)\n")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # three writers into one pipe, as scripts/local.sh's nodes share one output
        r, w = os.pipe()
        procs = [subprocess.Popen([sys.executable, "-c", source, str(k)], stdout=w, env=env) for k in range(3)]
        os.close(w)
        with os.fdopen(r) as f:
            lines = f.read().splitlines()
        for p in procs:
            assert p.wait(timeout=60) == 0
        glued = [ln for ln in lines if ln.count("node ") != 1]
        assert len(lines) == 6000 and not glued, f"{path.name}: {len(lines)} lines, glued: {glued[:3]}"
