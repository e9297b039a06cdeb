#!/usr/bin/env python3
"""Launch a psrs cluster over SSH, like dmlc-submit's ssh mode.

    deploy/ssh/launch.py --hosts HOSTS -s SERVERS -n WORKERS [--port P] [--env NAME[=VALUE]]...
                         [--workdir DIR] -- COMMAND [ARGS...]

HOSTS has one host per line (blank lines and # comments ignored), as `ssh` takes it
(`name`, `user@name`, or an alias of ~/.ssh/config). The scheduler runs on the first host,
servers and workers round-robin over all hosts. Nothing is copied: COMMAND (e.g.
/path/to/psrs train ...) must exist on every host; it runs in DIR there (default: the
current directory's path).

Each node gets DMLC_ROLE, DMLC_PS_ROOT_URI (the first host, without any `user@`),
DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER, every PS_*, DMLC_*, AWS_* and
RUST_LOG variable set here, and each --env (NAME takes this environment's value). The
variables and the command travel on ssh's standard input, never on a command line, so
no other user of a host sees them (`ps`); arguments keep their spaces and quotes.

Every host is checked first (ssh login, DIR, COMMAND found): a host that refuses is one
line on stderr and nothing is started. Output lines are prefixed with "role index@host".
The first node to fail, Ctrl-C or SIGTERM stops every node: each remote command runs in
its own process group, which gets SIGTERM when its ssh connection closes for any reason
(this launcher stopping, or killed) and SIGKILL 5 s later. The exit status is the first
failed node's (130/143 after SIGINT/SIGTERM, 255 when ssh itself failed). SSH is
`ssh -o BatchMode=yes` ($PSRS_SSH overrides, split like a shell would). The remote
login shell must be a POSIX shell (sh, bash, dash, zsh) with `base64` and `setsid`.
"""
import argparse, base64, os, shlex, signal, subprocess, sys, threading

# Read by the remote login shell: one line of base64 from standard input, decoded and run
# in the same shell (so its contents never appear in a process's arguments).
REMOTE = 'IFS= read -r s && eval "$(printf %s "$s" | base64 -d)"'
# Seconds between the SIGTERM and the SIGKILL of a remote command's process group.
GRACE_S = 5
# Variables passed on to every node.
FORWARD = ("PS_", "DMLC_", "AWS_")


def node_script(workdir, env, cmd):
    """The POSIX shell script a node's ssh runs: the command in its own process group,
    stopped (TERM, then KILL after GRACE_S) when standard input closes."""
    lines = [f"cd {shlex.quote(workdir)} || exit 126"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    lines += [
        "exec 3<&0",
        "setsid " + " ".join(shlex.quote(c) for c in cmd) + " </dev/null &",
        "p=$!",
        "( IFS= read -r _ <&3; kill -TERM -$p 2>/dev/null; i=0;"
        " while kill -0 -$p 2>/dev/null; do"
        f" if [ $i -ge {GRACE_S * 10} ]; then kill -KILL -$p 2>/dev/null; break; fi;"
        " sleep 0.1; i=$((i+1)); done ) &",
        "w=$!",
        "wait $p; rc=$?",
        "kill $w 2>/dev/null",
        "exit $rc",
    ]
    return "\n".join(lines) + "\n"


def check_script(workdir, prog):
    """The script of the check before the launch: DIR exists, COMMAND is found."""
    q = shlex.quote(prog)
    return (f"cd {shlex.quote(workdir)} 2>/dev/null || {{ echo {shlex.quote('no directory ' + workdir)} >&2; exit 126; }}\n"
            f"command -v {q} >/dev/null 2>&1 || {{ echo {shlex.quote(prog + ': command not found')} >&2; exit 127; }}\n")


def start(ssh, host, script, **kw):
    """Starts ssh to `host` running `script` (sent on its standard input, which stays
    open: closing it stops the remote command)."""
    pr = subprocess.Popen(ssh + [host, REMOTE], stdin=subprocess.PIPE, start_new_session=True, **kw)
    try:
        pr.stdin.write(base64.b64encode(script.encode()) + b"\n")
        pr.stdin.flush()
    except BrokenPipeError:
        pass  # ssh already exited (e.g. the host refused): its status says why
    return pr


def check_hosts(ssh, hosts, workdir, prog):
    """Checks every distinct host at once; returns the one-line errors."""
    checks = []
    for h in dict.fromkeys(hosts):
        pr = start(ssh, h, check_script(workdir, prog), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        checks.append((h, pr))
    errors = []
    for h, pr in checks:
        try:
            # closes ssh's standard input: the check script does not read it
            err = pr.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            pr.kill()
            err = pr.communicate()[1]
            errors.append(f"host {h}: no answer over ssh within 60 s")
            continue
        if pr.returncode != 0:
            lines = [l for l in err.decode(errors="replace").splitlines() if l.strip()]
            why = lines[-1].strip() if lines else f"ssh exited with status {pr.returncode}"
            errors.append(f"host {h}: {why}")
    return errors


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", required=True)
    p.add_argument("-s", "--servers", type=int, required=True)
    p.add_argument("-n", "--workers", type=int, required=True)
    p.add_argument("--port", type=int, default=9091)
    p.add_argument("--env", action="append", default=[], metavar="NAME[=VALUE]")
    p.add_argument("--workdir", default=os.getcwd())
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        p.error("no COMMAND given")
    try:
        hosts = [l.split("#")[0].strip() for l in open(a.hosts)]
    except OSError as e:
        p.error(f"--hosts: {e.strerror}: {a.hosts}")
    hosts = [h for h in hosts if h]
    if not hosts:
        p.error(f"{a.hosts} lists no host")
    ssh = shlex.split(os.environ.get("PSRS_SSH", "ssh -o BatchMode=yes"))
    base = {k: v for k, v in os.environ.items()
            if (k.startswith(FORWARD) or k == "RUST_LOG") and k != "DMLC_ROLE"}
    for e in a.env:
        k, eq, v = e.partition("=")
        if not k or not (k[0].isalpha() or k[0] == "_") or not all(c.isalnum() or c == "_" for c in k):
            p.error(f"--env {e}: not a variable name")
        if not eq:
            if k not in os.environ:
                p.error(f"--env {k}: not set here (give --env {k}=VALUE)")
            v = os.environ[k]
        base[k] = v
    base.update(DMLC_PS_ROOT_URI=hosts[0].rpartition("@")[2], DMLC_PS_ROOT_PORT=str(a.port),
                DMLC_NUM_SERVER=str(a.servers), DMLC_NUM_WORKER=str(a.workers))

    errors = check_hosts(ssh, hosts, a.workdir, cmd[0])
    if errors:
        for e in errors:
            print(f"launch.py: {e}", file=sys.stderr)
        sys.exit(255)

    nodes = [("scheduler", 0, hosts[0])]
    k = 0
    for role, count in (("server", a.servers), ("worker", a.workers)):
        for i in range(count):
            nodes.append((role, i, hosts[k % len(hosts)]))
            k += 1
    procs, lock, result = [], threading.Lock(), {"status": None}
    done = threading.Event()

    def finish(status):
        with lock:
            if result["status"] is None:
                result["status"] = status
        done.set()

    def pump(stream, tag, out):
        for line in stream:
            out.write(f"{tag}: {line.decode(errors='replace')}")
            out.flush()

    def watch(pr, tag, pumps):
        rc = pr.wait()
        for t in pumps:
            t.join()
        if rc != 0 and not done.is_set():
            what = "ssh failed" if rc == 255 else "exited"
            print(f"launch.py: {tag} {what} with status {rc}; stopping every node", file=sys.stderr)
            finish(rc)

    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        signal.signal(sig, lambda *_, c=code: finish(c))
    watchers = []
    for role, i, host in nodes:
        env = dict(base, DMLC_ROLE=role)
        pr = start(ssh, host, node_script(a.workdir, env, cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(pr)
        tag = f"{role} {i}@{host}"
        pumps = [threading.Thread(target=pump, args=(pr.stdout, tag, sys.stdout), daemon=True),
                 threading.Thread(target=pump, args=(pr.stderr, tag, sys.stderr), daemon=True)]
        for t in pumps:
            t.start()
        w = threading.Thread(target=watch, args=(pr, tag, pumps), daemon=True)
        w.start()
        watchers.append(w)
    threading.Thread(target=lambda: ([w.join() for w in watchers], done.set()), daemon=True).start()
    while not done.wait(0.2):
        pass
    # Closing ssh's standard input stops the remote command (TERM, KILL after GRACE_S);
    # ssh exits when it has. An ssh that hangs longer is killed here.
    for pr in procs:
        try:
            pr.stdin.close()
        except OSError:
            pass  # a broken pipe: that ssh is gone already
    for pr in procs:
        try:
            pr.wait(timeout=GRACE_S + 10)
        except subprocess.TimeoutExpired:
            pr.kill()
            pr.wait()
    sys.exit(result["status"] or 0)


if __name__ == "__main__":
    main()
