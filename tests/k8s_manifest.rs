//! deploy/k8s/: the rendered manifests (training.yaml, cluster.yaml) set only variables
//! psrs reads, each role's workload sets its own DMLC_ROLE, the node counts match the
//! workloads' sizes, the scheduler addresses are the scheduler pods' DNS names under
//! the headless Service, one scheduler is a standby, the active one is probed on its
//! statistics port; the jobs cluster's active scheduler, run here with its manifest's
//! arguments and variables, gets past every check of them. The ignored test (CI runs it with `--ignored`, after making the
//! Python virtualenv) checks that the files are render.py's current output and valid
//! against Kubernetes' API schemas (`kubernetes-validate`, from PyPI).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use yaml_rust2::{Yaml, YamlLoader};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `DMLC_*` / `PS_*` name quoted in psrs's sources.
fn variables_psrs_reads() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let src = std::fs::read_to_string(&p).unwrap();
                for piece in src.split('"').skip(1).step_by(2) {
                    if (piece.starts_with("DMLC_") || piece.starts_with("PS_"))
                        && piece.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    {
                        out.insert(piece.to_string());
                    }
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    for d in ["ps-core/src", "ps-apps/src", "src"] {
        walk(&Path::new(ROOT).join(d), &mut out);
    }
    out
}

fn load(file: &str) -> Vec<Yaml> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("deploy/k8s").join(file)).unwrap();
    YamlLoader::load_from_str(&text).unwrap()
}

fn pod_spec(doc: &Yaml) -> &Yaml {
    &doc["spec"]["template"]["spec"]
}

fn env_of(doc: &Yaml) -> BTreeMap<String, Yaml> {
    pod_spec(doc)["containers"][0]["env"]
        .as_vec()
        .expect("env list")
        .iter()
        .map(|e| (e["name"].as_str().unwrap().to_string(), e.clone()))
        .collect()
}

fn value(e: &BTreeMap<String, Yaml>, k: &str) -> String {
    e.get(k).unwrap_or_else(|| panic!("{k} is not set"))["value"]
        .as_str()
        .unwrap_or_else(|| panic!("{k} has a literal value"))
        .to_string()
}

/// The number of pods a workload runs at once.
fn size(doc: &Yaml) -> i64 {
    match doc["kind"].as_str() {
        Some("Job") => {
            assert_eq!(doc["spec"]["completions"], doc["spec"]["parallelism"]);
            doc["spec"]["parallelism"].as_i64().unwrap()
        }
        _ => doc["spec"]["replicas"].as_i64().unwrap(),
    }
}

fn check(file: &str, kind: &str) {
    let docs = load(file);
    let reads = variables_psrs_reads();
    assert!(
        reads.contains("DMLC_NUM_SERVER") && reads.contains("PS_SCHEDULER_STANDBY"),
        "{reads:?}"
    );
    let headless = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("Service") && d["spec"]["clusterIP"].as_str() == Some("None"))
        .expect("a headless Service for the schedulers");
    let svc = headless["metadata"]["name"].as_str().unwrap();
    let ps_port = headless["spec"]["ports"][0]["port"].as_i64().unwrap();
    let loads: Vec<&Yaml> = docs.iter().filter(|d| d["kind"].as_str() == Some(kind)).collect();
    assert_eq!(loads.len(), 4, "{file}: two schedulers, servers, workers");
    let of_role = |role: &str| -> Vec<&Yaml> {
        loads
            .iter()
            .copied()
            .filter(|d| value(&env_of(d), "DMLC_ROLE") == role)
            .collect()
    };
    let schedulers = of_role("scheduler");
    assert_eq!(schedulers.len(), 2, "{file}");
    let dns: Vec<String> = schedulers
        .iter()
        .map(|d| {
            assert_eq!(size(d), 1);
            assert_eq!(pod_spec(d)["subdomain"].as_str(), Some(svc));
            format!("{}.{svc}", pod_spec(d)["hostname"].as_str().unwrap())
        })
        .collect();
    let list = dns
        .iter()
        .map(|h| format!("{h}:{ps_port}"))
        .collect::<Vec<_>>()
        .join(",");
    let servers: i64 = of_role("server").iter().map(|d| size(d)).sum();
    let workers: i64 = of_role("worker").iter().map(|d| size(d)).sum();
    let mut standbys = 0;
    for d in &loads {
        let env = env_of(d);
        for k in env.keys() {
            assert!(reads.contains(k), "{file}: {k} is not a variable psrs reads");
        }
        let role = value(&env, "DMLC_ROLE");
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"]["role"].as_str(),
            Some(role.as_str())
        );
        assert_eq!(value(&env, "PS_SCHEDULERS"), list, "{file}");
        assert_eq!(value(&env, "DMLC_PS_ROOT_PORT"), ps_port.to_string());
        assert_eq!(value(&env, "DMLC_NUM_SERVER"), servers.to_string());
        assert_eq!(value(&env, "DMLC_NUM_WORKER"), workers.to_string());
        let c = &pod_spec(d)["containers"][0];
        assert!(
            c["resources"]["requests"]["cpu"].as_str().is_some(),
            "{file}: cpu request"
        );
        assert!(
            c["resources"]["requests"]["memory"].as_str().is_some(),
            "{file}: memory request"
        );
        let args: Vec<&str> = c["args"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let stats = args
            .iter()
            .position(|a| *a == "--stats-addr")
            .map(|i| args[i + 1].rsplit(':').next().unwrap().parse::<i64>().unwrap())
            .expect("--stats-addr");
        // the cluster secret comes from a mounted Secret
        let secret = value(&env, "PS_SECRET_FILE");
        let mount = c["volumeMounts"]
            .as_vec()
            .unwrap()
            .iter()
            .find(|m| secret.starts_with(m["mountPath"].as_str().unwrap()))
            .expect("PS_SECRET_FILE lies in a mounted volume");
        let vol = pod_spec(d)["volumes"]
            .as_vec()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        assert!(
            vol["secret"]["secretName"].as_str().is_some(),
            "{file}: a Secret volume"
        );
        // Secret volumes are 0644 by default; psrs refuses a secret others may read
        assert_eq!(
            vol["secret"]["defaultMode"].as_i64(),
            Some(0o400),
            "{file}: the Secret mounted 0400"
        );
        if role == "scheduler" {
            let me = format!("{}.{svc}", pod_spec(d)["hostname"].as_str().unwrap());
            assert_eq!(value(&env, "DMLC_PS_ROOT_URI"), me);
            let standby = env
                .get("PS_SCHEDULER_STANDBY")
                .map(|_| value(&env, "PS_SCHEDULER_STANDBY"));
            if standby.as_deref() == Some("1") {
                standbys += 1;
            } else {
                let probe = &c["livenessProbe"]["tcpSocket"]["port"];
                let port = c["ports"]
                    .as_vec()
                    .unwrap()
                    .iter()
                    .find(|p| p["name"] == *probe)
                    .expect("liveness on a named port")["containerPort"]
                    .as_i64();
                assert_eq!(port, Some(stats), "{file}: liveness on the statistics port");
            }
        } else {
            assert_eq!(value(&env, "DMLC_PS_ROOT_URI"), dns[0]);
            assert_eq!(
                env["DMLC_NODE_HOST"]["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
                Some("status.podIP")
            );
        }
    }
    assert_eq!(standbys, 1, "{file}: one standby scheduler");
}

#[test]
fn the_training_manifest_sets_what_psrs_reads_consistently() {
    check("training.yaml", "Job");
}

#[test]
fn the_cluster_manifest_sets_what_psrs_reads_consistently() {
    check("cluster.yaml", "Deployment");
}

/// The cluster manifest's active scheduler, run here as its pod would run it (its
/// arguments and literal variables; each mounted volume a directory here, the secret a
/// file in it, the addresses this host's): psrs accepts all of them and waits for the
/// cluster's nodes, giving up after PS_JOIN_TIMEOUT with the line that says so. An
/// option or variable it refuses, or an HTTP API beyond loopback without security or
/// with unconfined job paths, stops it at once with another line.
#[test]
fn the_cluster_manifests_scheduler_accepts_its_arguments_and_variables() {
    let docs = load("cluster.yaml");
    let d = docs
        .iter()
        .find(|d| d["metadata"]["name"].as_str() == Some("psrs-scheduler-0"))
        .expect("the active scheduler's Deployment");
    let c = &pod_spec(d)["containers"][0];
    let mut cluster = common::Cluster::new(0, 0, &[], &[], std::time::Duration::from_secs(60));
    let here = cluster.dir().to_path_buf();
    // every mounted path, mapped to a directory here named after its volume
    let mounts: Vec<(String, PathBuf)> = c["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|m| {
            let dir = here.join(m["name"].as_str().unwrap());
            std::fs::create_dir_all(&dir).unwrap();
            (m["mountPath"].as_str().unwrap().to_string(), dir)
        })
        .collect();
    let map = |v: &str| -> String {
        for (path, dir) in &mounts {
            if let Some(rest) = v.strip_prefix(path.as_str()) {
                return format!("{}{rest}", dir.display());
            }
        }
        v.to_string()
    };
    let stats = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let args: Vec<String> = c["args"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .map(|a| match a.rsplit_once(':') {
            Some(("0.0.0.0", _)) => format!("0.0.0.0:{stats}"),
            _ => map(a),
        })
        .collect();
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, e) in env_of(d) {
        let Some(v) = e["value"].as_str() else { continue }; // fieldRef: the pod's own
        match k.as_str() {
            // the addresses are this host's (the cluster helper's)
            "DMLC_PS_ROOT_URI" | "DMLC_PS_ROOT_PORT" | "PS_SCHEDULERS" => {}
            "PS_SECRET_FILE" => {
                let f = map(v);
                // a Secret volume with defaultMode 0400
                common::write_private(Path::new(&f), "the-secret-of-the-manifest-test-0123456789");
                env.push((k, f));
            }
            _ => env.push((k, map(v))),
        }
    }
    env.push(("PS_JOIN_TIMEOUT".into(), "3".into()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let s = cluster.spawn_with("scheduler", &a, &e);
    cluster.wait_until("the scheduler to give up waiting", |c| c.exited(s));
    let err = cluster.procs[s].stderr();
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.contains("registered within 3 s"),
        "the manifest's scheduler stopped before waiting for its nodes ({args:?}, {env:?}): {last}\n{err}"
    );
    cluster.kill_all();
}

/// The Python that has kubernetes-validate: $PSRS_PYTHON, else target/py-venv's.
fn python() -> PathBuf {
    let py = std::env::var_os("PSRS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join("target/py-venv/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", "import kubernetes_validate, yaml"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} cannot import kubernetes_validate and yaml: pip install kubernetes-validate (scripts/test.sh does), or set PSRS_PYTHON",
        py.display()
    );
    py
}

#[test]
#[ignore = "needs a Python with kubernetes-validate; scripts/test.sh runs it with --ignored"]
fn the_manifests_are_rendered_from_one_place_and_valid_kubernetes() {
    let py = python();
    let dir = tempfile::tempdir().unwrap();
    let render = Path::new(ROOT).join("deploy/k8s/render.py");
    let mut files = Vec::new();
    for (variant, extra) in [
        ("training", &[][..]),
        ("cluster", &[][..]),
        ("training", &["--with-secret", "-s", "4", "-n", "8"][..]),
    ] {
        let out = Command::new(&py)
            .arg(&render)
            .arg(variant)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        if extra.is_empty() {
            let committed =
                std::fs::read_to_string(Path::new(ROOT).join(format!("deploy/k8s/{variant}.yaml"))).unwrap();
            assert!(
                committed == text,
                "deploy/k8s/{variant}.yaml is not render.py's output: run deploy/k8s/render.py {variant} > deploy/k8s/{variant}.yaml"
            );
        } else {
            assert!(text.contains("kind: Secret"), "{text}");
        }
        let f = dir.path().join(format!("{}-{variant}.yaml", files.len()));
        std::fs::write(&f, text).unwrap();
        files.push(f);
    }
    // the oldest Kubernetes the manifests' fields need, and a recent one
    for version in ["1.27.0", "1.30.0"] {
        let out = Command::new(&py)
            .args(["-m", "kubernetes_validate", "--strict", "-k", version])
            .args(&files)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubernetes {version}: {text}");
        assert_eq!(text.matches(" passed for resource ").count(), 17, "{text}");
    }
}
