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
    RunnerSlot::new(RunnerConfig { python, threads: 1 })
}

fn f(dir: &std::path::Path, name: &str) -> UserModel {
    UserModel::Runner {
        function: format!("usermod:{name}"),
        pythonpath: Some(dir.display().to_string()),
    }
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
        .call(&Inputs::Paths(vec!["/x/a.jpg".into(), "/x/b.jpg".into()]), T)
        .unwrap();
    assert_eq!(out, vec![vec!["a.jpg".to_string()], vec!["b.jpg".to_string()]]);
    let out = s.call(&Inputs::Bytes(vec![b"hi".to_vec(), vec![]]), T).unwrap();
    assert_eq!(
        out,
        vec![vec!["2".to_string(), "hi".into()], vec!["0".into(), "".into()]]
    );
    s.load(1, &f(d.path(), "echo"), T).unwrap();
    assert_eq!(
        (imports(d.path()), s.loaded(), s.pid()),
        (1, Some(1), Some(pid)),
        "kept"
    );
    // another job: a fresh import of the module, in the same process
    s.load(2, &f(d.path(), "floats"), T).unwrap();
    let out = s.call(&Inputs::Paths(vec!["a".into(), "b".into()]), T).unwrap();
    assert_eq!(out, vec![vec!["3.0".to_string()], vec!["nan".to_string()]]);
    assert_eq!((imports(d.path()), s.pid()), (2, Some(pid)));
    // printing to stdout does not break the protocol
    s.load(3, &f(d.path(), "noisy"), T).unwrap();
    assert_eq!(s.call(&Inputs::Paths(vec!["a".into()]), T).unwrap(), vec![vec!["ok"]]);
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
    let e = s.call(&Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert_eq!(e.to_string(), "ValueError: no good");
    assert!(!e.is_fatal());
    for (name, want) in [
        ("short", "1 outputs for 2 inputs"),
        ("weird", "output 0 holds a dict"),
        ("text", "returned a str: it must return a list"),
    ] {
        s.load(1, &f(d.path(), name), T).unwrap();
        let e = s.call(&Inputs::Paths(vec!["a".into(), "b".into()]), T).unwrap_err();
        assert!(e.to_string().contains(want), "{name}: {e}");
    }
    assert_eq!(s.pid(), Some(pid), "the same process throughout");
    assert_eq!(s.loaded(), Some(1));
}

#[test]
fn a_hung_runner_is_killed_at_the_deadline_and_replaced() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    s.load(1, &f(d.path(), "hang"), T).unwrap();
    let pid = s.pid().unwrap();
    let t = Instant::now();
    let e = s
        .call(&Inputs::Paths(vec!["a".into()]), Duration::from_millis(800))
        .unwrap_err();
    assert!(matches!(e, RunnerError::Timeout(_)), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "killed and reaped"
    );
    assert_eq!((s.loaded(), s.pid()), (None, None));
    s.load(1, &f(d.path(), "echo"), T).unwrap();
    assert_ne!(s.pid(), Some(pid), "a new runner");
    assert_eq!(s.call(&Inputs::Paths(vec!["/a".into()]), T).unwrap(), vec![vec!["a"]]);
}

#[test]
fn a_runner_that_exits_or_is_killed_fails_one_request_and_is_replaced() {
    let d = tempfile::tempdir().unwrap();
    let mut s = slot(d.path());
    s.load(1, &f(d.path(), "leave"), T).unwrap();
    let e = s.call(&Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert_eq!(e.to_string(), "the Python runner died (exit status 3)");
    assert_eq!(s.loaded(), None);
    // killed from outside while idle: the slot notices before the next request
    s.load(2, &f(d.path(), "echo"), T).unwrap();
    let pid = s.pid().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    let start = Instant::now();
    while s.loaded().is_some() {
        assert!(start.elapsed() < Duration::from_secs(5), "the death went unnoticed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = s.call(&Inputs::Paths(vec!["a".into()]), T).unwrap_err();
    assert!(e.is_fatal(), "{e}");
    s.load(2, &f(d.path(), "echo"), T).unwrap();
    assert_ne!(s.pid(), Some(pid));
}

#[test]
fn a_missing_interpreter_is_named() {
    let mut s = RunnerSlot::new(RunnerConfig {
        python: "/nonexistent/python".into(),
        threads: 1,
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
    std::thread::sleep(Duration::from_millis(500)); // past its start-up
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the runner runs"
    );
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
