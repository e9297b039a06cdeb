#!/usr/bin/env python3
"""Launch a psrs cluster over SSH, like dmlc-submit's ssh mode.

    scripts/launch.py --hosts HOSTS -s SERVERS -n WORKERS [--port P] -- COMMAND [ARGS...]

HOSTS has one host per line (blank lines and # comments ignored). The scheduler runs
on the first host, servers and workers round-robin over all hosts. Nothing is copied:
COMMAND (e.g. /path/to/psrs kv-test) must exist on every host, and it runs in the
current directory's path there. Each node gets DMLC_ROLE, DMLC_PS_ROOT_URI (the first
host), DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER and any PS_*/DMLC_* variable
set here; it advertises its route to the scheduler. Output lines are prefixed with
"role index@host". The first node to fail, Ctrl-C or SIGTERM kills every node; the
exit status is that node's (130/143 for a signal). SSH is `ssh` on PATH ($PSRS_SSH
overrides).
"""
import argparse, os, shlex, signal, subprocess, sys, threading

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", required=True)
    p.add_argument("-s", "--servers", type=int, required=True)
    p.add_argument("-n", "--workers", type=int, required=True)
    p.add_argument("--port", type=int, default=9091)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no COMMAND given")
    hosts = [l.split("#")[0].strip() for l in open(a.hosts)]
    hosts = [h for h in hosts if h]
    if not hosts:
        p.error(f"{a.hosts} lists no host")
    ssh = shlex.split(os.environ.get("PSRS_SSH", "ssh -o BatchMode=yes"))
    base = {k: v for k, v in os.environ.items() if k.startswith(("PS_", "DMLC_")) and k != "DMLC_ROLE"}
    base.update(DMLC_PS_ROOT_URI=hosts[0], DMLC_PS_ROOT_PORT=str(a.port),
                DMLC_NUM_SERVER=str(a.servers), DMLC_NUM_WORKER=str(a.workers))
    nodes = [("scheduler", 0, hosts[0])]
    k = 0
    for role, count in (("server", a.servers), ("worker", a.workers)):
        for i in range(count):
            nodes.append((role, i, hosts[k % len(hosts)]))
            k += 1
    procs, lock, result = [], threading.Lock(), {"status": None}
    done = threading.Event()

    def kill_all():
        for pr in procs:
            if pr.poll() is None:
                pr.kill()

    def finish(status):
        with lock:
            if result["status"] is None:
                result["status"] = status
        done.set()

    def pump(pr, tag):
        for line in pr.stdout:
            sys.stdout.write(f"{tag}: {line}")
            sys.stdout.flush()
        rc = pr.wait()
        if rc != 0:
            print(f"launch.py: {tag} exited with status {rc}; killing every node", file=sys.stderr)
            finish(rc)

    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        signal.signal(sig, lambda *_, c=code: finish(c))
    threads = []
    for role, i, host in nodes:
        env = dict(base, DMLC_ROLE=role)
        remote = "cd {} && env {} {}".format(
            shlex.quote(os.getcwd()),
            " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())),
            " ".join(shlex.quote(c) for c in cmd))
        pr = subprocess.Popen(ssh + [host, remote], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, text=True)
        procs.append(pr)
        t = threading.Thread(target=pump, args=(pr, f"{role} {i}@{host}"), daemon=True)
        t.start()
        threads.append(t)
    waiter = threading.Thread(target=lambda: ([t.join() for t in threads], done.set()), daemon=True)
    waiter.start()
    done.wait()
    kill_all()
    for pr in procs:
        pr.wait()
    sys.exit(result["status"] or 0)

if __name__ == "__main__":
    main()
