//! The runner shell against a real `python3` (no torch needed): outputs of a user's
//! function, and each way a runner fails — the user's code raising, printing to
//! stdout, hanging past the deadline, exiting, being killed from outside — with the
//! runner kept (raise) or replaced (the rest), a model loaded once per job, and a
//! runner that ends with the process that started it.

use super::*;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

const MODULE: &str = r#"
import os, sys, time
with open(os.path.join(os.path.dirname(__file__), "imports.log"), "a") as f:
    f.write("imported\n")

def echo(inputs):
    out = []
    for x in inputs:
        if isinstance(x, bytes):
            out.append([len(x), x.decode()])
        else:
            out.append(os.path.basename(x))
    return out

def floats(inputs):
    return [1.5 * len(inputs)] + [float("nan")] * (len(inputs) - 1)

def noisy(inputs):
    print("a line on stdout that must not reach the protocol")
    sys.stdout.write("more\n")
    return ["ok"] * len(inputs)

def bad(inputs):
    raise ValueError("no good\nsecond line")

def short(inputs):
    return inputs[:-1]

def weird(inputs):
    return [{"a": 1}] * len(inputs)

def text(inputs):
    return "one string"

def hang(inputs):
    time.sleep(600)

def leave(inputs):
    os._exit(3)
"#;

fn slot(dir: &std::path::Path) -> RunnerSlot {
    std::fs::write(dir.join("usermod.py"), MODULE).unwrap();
    let python = "python3".to_string();
    assert!(
        std::process::Command::new(&python).arg("-V").output().is_ok(),
        "python3 is not installed: apt-get install python3"
    );
    RunnerSlot::new(RunnerConfig {
        python,
        threads: 1,
        memory_budget_mb: 0,
        preload: vec![],
    })
}

fn f(dir: &std::path::Path, name: &str) -> UserModel {
    UserModel::Runner {
        function: format!("usermod:{name}"),
        pythonpath: Some(dir.display().to_string()),
    }
}

/// The jobs whose models the slot's runner has ready.
fn ready(s: &mut RunnerSlot) -> Vec<u32> {
    let st = s.status(T).unwrap();
    st.models
        .iter()
        .filter(|m| m.state == ModelState::Ready)
        .map(|m| m.job)
        .collect()
}

fn imports(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("imports.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn outputs_become_csv_fields_and_a_model_is_loaded_once_per_job() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    s.load(1, &f(d.path(), "echo"), T).unwrap();
    let pid = s.pid().unwrap();
    let out = s
        .call(1, &Inputs::Paths(vec!["/x/a.jpg".into(), "/x/b.jpg".into()]), T)
        .unwrap();
    assert_eq!(out, vec![vec!["a.jpg".to_string()], vec!["b.jpg".to_string()]]);
    let out = s.call(1, &Inputs::Bytes(vec![b"hi".to_vec(), vec![]]), T).unwrap();
    assert_eq!(
        out,
        vec![vec!["2".to_string(), "hi".into()], vec!["0".into(), "".into()]]
    );
    s.load(1, &f(d.path(), "echo"), T).unwrap();
    assert_eq!(
        (imports(d.path()), ready(&mut s), s.pid()),
        (1, vec![1], Some(pid)),
        "kept"
    );
    // another job: a fresh import of the module, in the same process; job 1's stays
    s.load(2, &f(d.path(), "floats"), T).unwrap();
    let out = s.call(2, &Inputs::Paths(vec!["a".into(), "b".into()]), T).unwrap();
    assert_eq!(out, vec![vec!["3.0".to_string()], vec!["nan".to_string()]]);
    assert_eq!((imports(d.path()), s.pid()), (2, Some(pid)));
    assert_eq!(
        s.call(1, &Inputs::Paths(vec!["/y/c".into()]), T).unwrap(),
        vec![vec!["c"]]
    );
    // printing to stdout does not break the protocol
    s.load(3, &f(d.path(), "noisy"), T).unwrap();
    assert_eq!(
        s.call(3, &Inputs::Paths(vec!["a".into()]), T).unwrap(),
        vec![vec!["ok"]]
    );
    // a job whose model the runner does not hold fails that request only
    let e = s.call(9, &Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert!(e.to_string().contains("job 9's model is not loaded"), "{e}");
    assert_eq!(s.pid(), Some(pid));
}

#[test]
fn raising_code_fails_the_request_and_the_runner_stays() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    let e = s.load(1, &f(d.path(), "missing"), T).unwrap_err();
    assert!(e.to_string().contains("has no function 'missing'"), "{e}");
    let e = s
        .load(
            1,
            &UserModel::Runner {
                function: "no_such_module:f".into(),
                pythonpath: None,
            },
            T,
        )
        .unwrap_err();
    assert!(e.to_string().starts_with("ModuleNotFoundError"), "{e}");
    let pid = s.pid().unwrap();
    s.load(1, &f(d.path(), "bad"), T).unwrap();
    let e = s.call(1, &Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert_eq!(e.to_string(), "ValueError: no good");
    assert!(!e.is_fatal());
    for (name, want) in [
        ("short", "1 outputs for 2 inputs"),
        ("weird", "output 0 holds a dict"),
        ("text", "returned a str: it must return a list"),
    ] {
        s.load(1, &f(d.path(), name), T).unwrap();
        let e = s.call(1, &Inputs::Paths(vec!["a".into(), "b".into()]), T).unwrap_err();
        assert!(e.to_string().contains(want), "{name}: {e}");
    }
    assert_eq!(s.pid(), Some(pid), "the same process throughout");
    assert_eq!(ready(&mut s), [1]);
}

#[test]
fn a_hung_runner_is_killed_at_the_deadline_and_replaced() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    s.load(1, &f(d.path(), "hang"), T).unwrap();
    let pid = s.pid().unwrap();
    let t = Instant::now();
    let e = s
        .call(1, &Inputs::Paths(vec!["a".into()]), Duration::from_millis(800))
        .unwrap_err();
    assert!(matches!(e, RunnerError::Timeout(_)), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "killed and reaped"
    );
    assert_eq!((ready(&mut s), s.pid()), (vec![], None));
    s.load(1, &f(d.path(), "echo"), T).unwrap();
    assert_ne!(s.pid(), Some(pid), "a new runner");
    assert_eq!(
        s.call(1, &Inputs::Paths(vec!["/a".into()]), T).unwrap(),
        vec![vec!["a"]]
    );
}

#[test]
fn a_runner_that_exits_or_is_killed_fails_one_request_and_is_replaced() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    s.load(1, &f(d.path(), "leave"), T).unwrap();
    let e = s.call(1, &Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert_eq!(e.to_string(), "the Python runner died (exit status 3)");
    assert!(ready(&mut s).is_empty());
    // killed from outside while idle: the slot notices before the next request
    s.load(2, &f(d.path(), "echo"), T).unwrap();
    let pid = s.pid().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    let start = Instant::now();
    while s.running() {
        assert!(start.elapsed() < Duration::from_secs(5), "the death went unnoticed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = s.call(2, &Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert!(e.is_fatal(), "{e}");
    s.load(2, &f(d.path(), "echo"), T).unwrap();
    assert_ne!(s.pid(), Some(pid));
}

#[test]
fn a_missing_interpreter_is_named() {
    let mut s = RunnerSlot::new(RunnerConfig {
        python: "/nonexistent/python".into(),
        threads: 1,
        memory_budget_mb: 0,
        preload: vec![],
    });
    let e = s.load(1, &UserModel::Torch("m.pt".into()), T).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/python"), "{e}");
}

#[test]
fn a_runner_ends_with_its_worker() {
    // a stand-in worker: a shell that starts the runner source and then is killed
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("usermod.py"), MODULE).unwrap();
    let mut worker = std::process::Command::new("sh")
        .args([
            "-c",
            "exec 3<&0; python3 -c \"$BOOT\" <&3 & echo $! > \"$DIR/pid\"; exec sleep 600",
        ])
        .env(
            "BOOT",
            "import os; exec(compile(os.environ['PSRS_RUNNER_SOURCE'], 'r', 'exec'))",
        )
        .env("PSRS_RUNNER_SOURCE", process::SOURCE)
        .env("DIR", d.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // held open to the end: the runner must end by its worker's death, not by end of input
    let _input = worker.stdin.take();
    let pid_file = d.path().join("pid");
    let start = Instant::now();
    let pid = loop {
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        {
            break p;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the runner never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    // past its start-up: its loader thread runs (started after it asked to die with
    // its parent), however long the interpreter took to start on a busy machine
    let threads = || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
    while threads() < 2 {
        assert!(start.elapsed() < Duration::from_secs(60), "the runner never got going");
        std::thread::sleep(Duration::from_millis(10));
    }
    worker.kill().unwrap();
    worker.wait().unwrap();
    let gone = Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z ")) {
        assert!(
            gone.elapsed() < Duration::from_secs(10),
            "the runner outlived its worker"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A model whose import takes 3 s and holds 64 MB (pages touched, so the runner's
/// resident memory grows by them).
const SLOW: &str = r#"
import time
time.sleep(3)
BLOB = bytearray(64 << 20)
for i in range(0, len(BLOB), 4096):
    BLOB[i] = 1

def size(inputs):
    return [len(BLOB)] * len(inputs)
"#;

fn status_of(s: &mut RunnerSlot, job: u32) -> Option<ModelStatus> {
    s.status(T).unwrap().models.into_iter().find(|m| m.job == job)
}

fn until_settled(s: &mut RunnerSlot, job: u32) -> ModelStatus {
    let start = Instant::now();
    loop {
        let m = status_of(s, job).expect("listed while it loads");
        if m.state != ModelState::Loading {
            return m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "job {job}'s model never loaded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_model_warms_in_the_background_while_another_job_is_served() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    std::fs::write(d.path().join("slowmod.py"), SLOW).unwrap();
    let slow = UserModel::Runner {
        function: "slowmod:size".into(),
        pythonpath: Some(d.path().display().to_string()),
    };
    s.load(1, &f(d.path(), "echo"), T).unwrap();
    let pid = s.pid();
    let rss_before = s.status(T).unwrap().rss;
    s.warm(2, &slow, T).unwrap();
    // job 1's batches are answered while job 2's model loads
    for k in 0..5 {
        let out = s.call(1, &Inputs::Paths(vec![format!("/x/{k}")]), T).unwrap();
        assert_eq!(out, vec![vec![k.to_string()]]);
    }
    let m = status_of(&mut s, 2).unwrap();
    assert_eq!(m.state, ModelState::Loading, "the calls did not wait for the load");
    assert!(s.call(2, &Inputs::Paths(vec!["a".into()]), T).is_err(), "not ready yet");
    let m = until_settled(&mut s, 2);
    assert_eq!(m.state, ModelState::Ready, "{m:?}");
    assert!(m.load_s >= 2.9, "{m:?}");
    assert!(m.cpu_s < m.load_s / 2.0, "the import slept: {m:?}");
    assert!(m.bytes >= 60 << 20 && m.rss_growth >= 60 << 20, "{m:?}");
    assert!(m.ready_ago_ms.is_some_and(|a| a < 30_000), "{m:?}");
    let st = s.status(T).unwrap();
    assert!(st.rss >= rss_before + (60 << 20), "{} -> {}", rss_before, st.rss);
    assert_eq!(
        s.call(2, &Inputs::Paths(vec!["a".into()]), T).unwrap(),
        vec![vec![(64 << 20).to_string()]]
    );
    // asked again: kept, not loaded again
    s.warm(2, &slow, T).unwrap();
    assert_eq!(status_of(&mut s, 2).unwrap().state, ModelState::Ready);
    assert_eq!(s.pid(), pid);
    // dropped: gone from the runner, job 1's model stays
    s.drop_model(2, T).unwrap();
    assert_eq!(ready(&mut s), [1]);
    // a load that fails in the background fails only itself
    s.warm(
        3,
        &UserModel::Runner {
            function: "no_such_module:f".into(),
            pythonpath: None,
        },
        T,
    )
    .unwrap();
    let m = until_settled(&mut s, 3);
    assert_eq!(m.state, ModelState::Failed);
    assert!(
        m.error.as_deref().unwrap_or("").starts_with("ModuleNotFoundError"),
        "{m:?}"
    );
    assert_eq!(
        s.call(1, &Inputs::Paths(vec!["/z/q".into()]), T).unwrap(),
        vec![vec!["q"]]
    );
    assert_eq!(s.pid(), pid, "one process throughout");
}

#[test]
fn two_jobs_of_one_module_each_get_their_own_copy() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    std::fs::write(
        d.path().join("counter.py"),
        "N = [0]\n\ndef f(inputs):\n    N[0] += len(inputs)\n    return [N[0]] * len(inputs)\n",
    )
    .unwrap();
    let m = UserModel::Runner {
        function: "counter:f".into(),
        pythonpath: Some(d.path().display().to_string()),
    };
    s.warm(1, &m, T).unwrap();
    s.warm(2, &m, T).unwrap();
    until_settled(&mut s, 1);
    until_settled(&mut s, 2);
    let p = |n: usize| Inputs::Paths(vec!["a".into(); n]);
    assert_eq!(s.call(1, &p(2), T).unwrap(), vec![vec!["2"]; 2]);
    assert_eq!(s.call(1, &p(1), T).unwrap(), vec![vec!["3"]]);
    assert_eq!(
        s.call(2, &p(1), T).unwrap(),
        vec![vec!["1"]],
        "job 2's module state is its own"
    );
}

#[test]
fn preloaded_modules_are_imported_before_any_model_loads() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("usermod.py"), MODULE).unwrap();
    // a model module that says whether a library was imported before it
    std::fs::write(
        d.path().join("uses.py"),
        "import sys\nBEFORE = 'xml.dom.minidom' in sys.modules\n\ndef f(inputs):\n    return [BEFORE] * len(inputs)\n",
    )
    .unwrap();
    let m = UserModel::Runner {
        function: "uses:f".into(),
        pythonpath: Some(d.path().display().to_string()),
    };
    let cfg = |preload: Vec<String>| RunnerConfig {
        python: "python3".into(),
        threads: 1,
        memory_budget_mb: 0,
        preload,
    };
    for (preload, want) in [
        (vec![], "false"),
        (vec!["no_such_library".into(), "xml.dom.minidom".into()], "true"),
    ] {
        let c = cfg(preload);
        c.validate().unwrap();
        let mut s = RunnerSlot::new(c);
        s.start(T).unwrap();
        s.load(1, &m, T).unwrap();
        let out = s.call(1, &Inputs::Paths(vec!["a".into()]), T).unwrap();
        assert_eq!(out, vec![vec![want]], "a library that does not import is skipped");
    }
    // a bad module name is refused before any runner starts
    let e = cfg(vec!["torch;rm".into()]).validate().unwrap_err();
    assert!(e.to_string().contains("--runner-preload"), "{e}");
}
