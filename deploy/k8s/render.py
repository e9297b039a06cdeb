#!/usr/bin/env python3
"""Render psrs's Kubernetes manifests (YAML on standard output).

    deploy/k8s/render.py training [options] [-- PSRS ARGS...]   one training run
    deploy/k8s/render.py cluster  [options]                      a jobs cluster

Both variants come from the same pieces below (one pod template for every role), so
a change to how a node runs is made once. The files beside this one are these commands'
output with the defaults (`tests/k8s_manifest.rs` checks that they are current and
valid against Kubernetes' API schemas):

    deploy/k8s/render.py training > deploy/k8s/training.yaml
    deploy/k8s/render.py cluster > deploy/k8s/cluster.yaml

- Two schedulers, `<name>-scheduler-0` (active) and `<name>-scheduler-1` (a standby
  that takes over when the active one dies), each with a stable DNS name through the
  headless Service `<name>-scheduler` (PS_SCHEDULERS lists both).
- training: the schedulers, servers and workers are Jobs (restarted on failure: a
  restarted node takes its dead predecessor's place); everything ends when the run does.
- cluster: Deployments for a `psrs cluster` that stays up; the Service `<name>-jobs`
  reaches the jobs API and dashboard on whichever scheduler is active (readiness: the
  standby's port opens when it takes over).
- The cluster secret comes from the Secret `<name>-secret` (key `secret`, mounted as
  PS_SECRET_FILE); `--with-secret` adds one with a fresh random value. S3 credentials
  (AWS_* variables) come from the Secret `<name>-s3` when it exists.
- Liveness: the active scheduler's statistics port (TCP).
- cluster: jobs' local files are confined to the volume `data` at /data (`--data-dir
  /data --outputs-dir /data/outputs`; an emptyDir here: give it a shared
  PersistentVolumeClaim, ReadWriteMany, to keep outputs and let a standby scheduler join
  the batches the active one saved); datasets and models may also be object-store URLs.
"""
import argparse, secrets, sys

try:
    import yaml
except ImportError:
    sys.exit("render.py: needs PyYAML (pip install pyyaml, or apt-get install python3-yaml)")

PS_PORT = 9091
STATS_PORT = 8080

TRAIN_ARGS = [
    "train", "--model", "softmax", "--epochs", "4", "--lr", "0.05",
    "--train", "s3://psrs-data/fashion-mnist/train.rio",
    "--test", "s3://psrs-data/fashion-mnist/t10k.rio",
    "--work-dir", "/work", "--out", "/work/model.bin",
]


class _Dumper(yaml.SafeDumper):
    """Writes repeated pieces out in full (no YAML anchors): easier to read and diff."""

    def ignore_aliases(self, data):
        return True


def resources(cpu, memory):
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}


def env_list(pairs):
    out = []
    for k, v in pairs:
        out.append({"name": k, "valueFrom": v} if isinstance(v, dict) else {"name": k, "value": str(v)})
    return out


def pod(o, role, index=None, restart="OnFailure"):
    """The pod template of one role: every workload uses this."""
    sched = [f"{o.name}-scheduler-{i}.{o.name}-scheduler:{PS_PORT}" for i in range(2)]
    env = [
        ("DMLC_ROLE", role),
        ("DMLC_PS_ROOT_URI", f"{o.name}-scheduler-{index if role == 'scheduler' else 0}.{o.name}-scheduler"),
        ("DMLC_PS_ROOT_PORT", PS_PORT),
        ("DMLC_NUM_SERVER", o.servers),
        ("DMLC_NUM_WORKER", o.workers),
        ("PS_SCHEDULERS", ",".join(sched)),
        ("PS_SECRET_FILE", "/etc/psrs/secret"),
    ]
    if role == "scheduler":
        # the Service's name resolves to this pod's own address: bind every interface
        env.append(("DMLC_BIND_HOST", "0.0.0.0"))
        if index == 1:
            env.append(("PS_SCHEDULER_STANDBY", 1))
    else:
        env.append(("DMLC_NODE_HOST", {"fieldRef": {"fieldPath": "status.podIP"}}))
    container = {
        "name": "psrs",
        "image": o.image,
        "args": o.args + ["--stats-addr", f"0.0.0.0:{STATS_PORT}"],
        "env": env_list(env),
        "envFrom": [{"secretRef": {"name": f"{o.name}-s3", "optional": True}}],
        "resources": resources(*{"scheduler": (o.scheduler_cpu, o.scheduler_memory),
                                  "server": (o.server_cpu, o.server_memory),
                                  "worker": (o.worker_cpu, o.worker_memory)}[role]),
        "volumeMounts": [
            {"name": "secret", "mountPath": "/etc/psrs", "readOnly": True},
            {"name": "work", "mountPath": "/work"},
        ] + ([{"name": "data", "mountPath": "/data"}] if o.variant == "cluster" else []),
    }
    if role == "scheduler":
        container["ports"] = [{"name": "ps", "containerPort": PS_PORT},
                              {"name": "stats", "containerPort": STATS_PORT}]
        probe = {"tcpSocket": {"port": "stats"}, "periodSeconds": 10}
        # a standby opens its statistics port only when it takes over
        if index == 0:
            container["livenessProbe"] = dict(probe, initialDelaySeconds=30, failureThreshold=3)
        if o.variant == "cluster":
            container["readinessProbe"] = dict(probe, periodSeconds=2)
    spec = {
        "restartPolicy": restart,
        "containers": [container],
        "volumes": [
            {"name": "secret", "secret": {"secretName": f"{o.name}-secret"}},
            {"name": "work", "emptyDir": {}},
        ] + ([{"name": "data", "emptyDir": {}}] if o.variant == "cluster" else []),
    }
    labels = {"app.kubernetes.io/name": "psrs", "app.kubernetes.io/instance": o.name, "role": role}
    if role == "scheduler":
        spec["hostname"] = f"{o.name}-scheduler-{index}"
        spec["subdomain"] = f"{o.name}-scheduler"
        labels["scheduler-index"] = str(index)
    return {"metadata": {"labels": labels}, "spec": spec}


def workload(o, role, count, index=None):
    name = f"{o.name}-{role}" + (f"-{index}" if index is not None else "")
    if o.variant == "training":
        tpl = pod(o, role, index)
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": tpl["metadata"]["labels"]},
                "spec": {"completions": count, "parallelism": count, "backoffLimit": 6, "template": tpl}}
    tpl = pod(o, role, index, restart="Always")
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": tpl["metadata"]["labels"]},
            "spec": {"replicas": count, "selector": {"matchLabels": tpl["metadata"]["labels"]}, "template": tpl}}


def render(o):
    docs = [{
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{o.name}-scheduler"},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {"app.kubernetes.io/instance": o.name, "role": "scheduler"},
                 "ports": [{"name": "ps", "port": PS_PORT}, {"name": "stats", "port": STATS_PORT}]},
    }]
    if o.variant == "cluster":
        docs.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{o.name}-jobs"},
            "spec": {"selector": {"app.kubernetes.io/instance": o.name, "role": "scheduler"},
                     "ports": [{"name": "http", "port": STATS_PORT, "targetPort": "stats"}]},
        })
    if o.with_secret:
        docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{o.name}-secret"},
                     "type": "Opaque", "stringData": {"secret": secrets.token_hex(32)}})
    docs += [workload(o, "scheduler", 1, 0), workload(o, "scheduler", 1, 1),
             workload(o, "server", o.servers), workload(o, "worker", o.workers)]
    return docs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("variant", choices=["training", "cluster"])
    p.add_argument("--name", default="psrs", help="prefix of every object's name")
    p.add_argument("--image", default="psrs:latest")
    p.add_argument("-s", "--servers", type=int, default=2)
    p.add_argument("-n", "--workers", type=int, default=3)
    p.add_argument("--with-secret", action="store_true", help="add the Secret with a fresh random value")
    for role, cpu, mem in (("scheduler", "250m", "256Mi"), ("server", "1", "1Gi"), ("worker", "1", "1Gi")):
        p.add_argument(f"--{role}-cpu", default=cpu)
        p.add_argument(f"--{role}-memory", default=mem)
    p.epilog = "after --: the psrs arguments (training; default: a softmax run)"
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    o = p.parse_args(argv[:cut])
    args = argv[cut + 1:]
    if o.variant == "cluster":
        if args:
            p.error("cluster takes no psrs arguments")
        # the API listens beyond loopback: jobs' files confined to /data; it answers
        # requests addressed to its Service's name (and to addresses, as through
        # kubectl port-forward)
        args = ["cluster", "--work-dir", "/work", "--data-dir", "/data", "--outputs-dir", "/data/outputs",
                "--api-host", f"{o.name}-jobs"]
    o.args = args or TRAIN_ARGS
    if o.servers < 1 or o.workers < 1:
        p.error("--servers and --workers must be at least 1")
    header = (f"# Rendered by deploy/k8s/render.py {o.variant}: edit that script, not this file.\n"
              f"# kubectl apply -f this file after creating the Secret {o.name}-secret (docs/deploy.md).\n")
    sys.stdout.write(header + yaml.dump_all(render(o), Dumper=_Dumper, sort_keys=False, default_flow_style=False))


if __name__ == "__main__":
    main()
