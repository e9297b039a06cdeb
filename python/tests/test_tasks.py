"""The master's tasks from Python workers: every task trained once per pass (a task
whose body raised is handed out again), and a worker killed with SIGKILL at several
moments: its tasks are requeued and the job finishes."""

import re
import subprocess

import pytest

from cluster import psrs_bin, py

ROWS, PER_CHUNK, EPOCHS = 240, 20, 2
TASKS = ROWS // PER_CHUNK * EPOCHS
FAST_HEARTBEATS = {"PS_HEARTBEAT_INTERVAL": "0.2", "PS_HEARTBEAT_TIMEOUT": "1"}


@pytest.fixture
def dataset(tmp_path):
    csv = tmp_path / "data.csv"
    csv.write_text("".join(f"{i % 3},{i},{i / 2},1\n" for i in range(ROWS)))
    rio = tmp_path / "data.rio"
    subprocess.run(
        [psrs_bin(), "convert", "--format", "csv", "--input", str(csv), "--out", str(rio),
         "--per-chunk", str(PER_CHUNK)],
        check=True, capture_output=True,
    )
    return str(rio)


def done_lines(node):
    return [tuple(map(int, m)) for m in re.findall(r"^done (\d+) (\d+) (\d+) (\d+)$", node.stdout(), re.M)]


def test_every_task_trained_once_and_a_raising_body_fails_its_task(cluster_factory, dataset):
    c = cluster_factory(1, 2, limit=90)
    node = py("task_node.py", "--train", dataset, "--epochs", str(EPOCHS), "--raise-first")
    c.start(node, node, node)
    c.assert_ok()
    done = [d for w in c.role("worker") for d in done_lines(w)]
    ids = sorted(d[0] for d in done)
    assert ids == list(range(TASKS)), f"tasks done: {ids}\n{c.logs()}"
    for epoch in range(EPOCHS):
        rows = [d for d in done if d[1] == epoch]
        assert sum(d[2] for d in rows) == ROWS
        assert sum(d[3] for d in rows) == sum(range(ROWS)), "each record once per pass"
    raised = re.findall(r"raised in task (\d+)", c.logs())
    assert len(raised) == 1, c.logs()
    assert int(raised[0]) in ids


@pytest.mark.parametrize("moment", ["mid-task", "between-tasks"])
def test_worker_killed_mid_job(cluster_factory, dataset, moment):
    c = cluster_factory(1, 2, limit=90, env=FAST_HEARTBEATS)
    node = py("task_node.py", "--train", dataset, "--epochs", str(EPOCHS), "--sleep", "0.15")
    c.start(node, node, node)
    victim, survivor = c.role("worker")
    if moment == "mid-task":
        # in the body of its third task (it sleeps there)
        c.wait_until(lambda: len(re.findall(r"^start", victim.stdout(), re.M)) >= 3, "the third task")
    else:
        # just after a body returned: the task is not reported yet
        c.wait_until(lambda: len(done_lines(victim)) >= 3, "three tasks done")
    victim.kill()
    c.assert_ok([n for n in c.nodes if n is not victim])
    started = [int(x) for x in re.findall(r"^start (\d+)", victim.stdout(), re.M)]
    mine = {d[0] for d in done_lines(victim)}
    theirs = [d[0] for d in done_lines(survivor)]
    assert len(theirs) == len(set(theirs)), "the survivor trained a task twice"
    # every task was trained; the victim's unfinished one by the survivor
    assert mine | set(theirs) == set(range(TASKS)), c.logs()
    unfinished = [t for t in started if t not in mine]
    assert all(t in theirs for t in unfinished), c.logs()
    if moment == "mid-task":
        assert unfinished, c.logs()
    assert "finished" in survivor.stdout()
