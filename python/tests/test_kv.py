"""KV clusters of real processes: Python workers and servers running the kv-test
checks, and Python workers against Rust servers (`psrs kv-test`)."""

import pytest

from cluster import psrs_bin, py


@pytest.mark.parametrize("uneven", [False, True], ids=["even", "uneven"])
def test_python_workers_and_servers(cluster_factory, uneven):
    args = ["--edge-cases"] + (["--uneven"] if uneven else [])
    c = cluster_factory(2, 2, limit=90)
    node = py("kv_node.py", *args)
    c.start(node, node, node)
    c.assert_ok()
    for w in c.role("worker"):
        out = w.stdout()
        assert "kv-test ok" in out and "= 40 x pushed" in out, c.logs()
        assert "kv-test edge cases ok" in out, c.logs()
        for what in ["unsorted keys refused", "3 values for 2 keys refused", "unsorted pull refused",
                     "handle error reached the worker", "sgd handle ok", "another thread ran during a wait",
                     "Ctrl-C interrupted a wait"]:
            assert what in out, c.logs()


def test_python_workers_with_rust_servers(cluster_factory):
    c = cluster_factory(2, 2, limit=90)
    rust = [psrs_bin(), "kv-test"]
    c.start(rust, rust, py("kv_node.py", "--edge-cases", "--rust-servers", "--uneven"))
    c.assert_ok()
    for w in c.role("worker"):
        assert "kv-test ok" in w.stdout() and "kv-test edge cases ok" in w.stdout(), c.logs()
