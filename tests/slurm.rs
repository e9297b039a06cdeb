//! psrs under a real Slurm on this machine (Debian's slurm-wlm and munge): slurmctld,
//! slurmd and munged started here with a minimal slurm.conf in a scratch folder, then
//! `srun -n 5` of kv-test and of a training job (roles from SLURM_PROCID) and an
//! `sbatch` of deploy/slurm/psrs.sbatch. The daemons are stopped by pid and the folder removed.
//! Needs root and the packages: ignored by a plain `cargo test`, run by CI with
//! `--ignored` (where it fails if Slurm cannot start).

mod common;

use common::{free_port, psrs_bin};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Daemons {
    dir: tempfile::TempDir,
    kids: Vec<Child>,
}

impl Drop for Daemons {
    fn drop(&mut self) {
        for k in self.kids.iter_mut().rev() {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}

fn start() -> Daemons {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for sub in ["state", "spool"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    std::fs::write(
        dir.path().join("slurm.conf"),
        format!(
            "ClusterName=psrs\nSlurmctldHost=localhost\nProctrackType=proctrack/linuxproc\nSlurmdParameters=config_overrides\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/ctld.pid\nSlurmdPidFile={d}/slurmd.pid\nMailProg=/bin/true\nNodeName=localhost CPUs=8 RealMemory=1000 State=UNKNOWN\nPartitionName=debug Nodes=ALL Default=YES State=UP\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all("/run/munge").unwrap();
    assert!(Command::new("chown")
        .args(["munge:munge", "/run/munge"])
        .status()
        .unwrap()
        .success());
    let spawn = |args: &[&str]| {
        Command::new(args[0])
            .args(&args[1..])
            .env("SLURM_CONF", format!("{d}/slurm.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} (apt-get install slurm-wlm munge): {e}", args[0]))
    };
    let mut s = Daemons { dir, kids: Vec::new() };
    s.kids.push(spawn(&[
        "setpriv",
        "--reuid=munge",
        "--regid=munge",
        "--init-groups",
        "/usr/sbin/munged",
        "-F",
    ]));
    std::thread::sleep(Duration::from_millis(500));
    s.kids.push(spawn(&["slurmctld", "-D"]));
    s.kids.push(spawn(&["slurmd", "-D"]));
    s
}

fn slurm(s: &Daemons, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(args[0]);
    c.args(&args[1..])
        .current_dir(s.dir.path())
        .env("SLURM_CONF", s.dir.path().join("slurm.conf"))
        .env("DMLC_NUM_SERVER", "2")
        .env("PS_JOIN_TIMEOUT", "30");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
#[ignore = "needs root, slurm-wlm and munge; CI runs it with --ignored"]
fn srun_and_sbatch_run_kv_test_with_roles_from_slurm() {
    let s = start();
    let bin = psrs_bin().display().to_string();
    let port = free_port().to_string();
    // the node needs a moment to register with slurmctld
    let t = Instant::now();
    let out = loop {
        let out = slurm(
            &s,
            &[
                "timeout",
                "60",
                "srun",
                "-n",
                "5",
                "--immediate=10",
                &bin,
                "kv-test",
                "--keys",
                "500",
                "--repeat",
                "3",
            ],
            &[("DMLC_PS_ROOT_PORT", &port)],
        );
        if out.status.success() || t.elapsed() > Duration::from_secs(20) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("kv-test ok").count(), 2, "{text}");

    // a training job: 1 pass of softmax over Fashion-MNIST's test split (20 tasks)
    let job = common::training::small_job(s.dir.path(), 1);
    let port = free_port().to_string();
    let out = slurm(
        &s,
        &["timeout", "120", "srun", "-n", "5", "--immediate=10", &bin]
            .into_iter()
            .chain(job.iter().map(|s| s.as_str()))
            .collect::<Vec<_>>(),
        &[("DMLC_PS_ROOT_PORT", &port)],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("progress: 20/20 tasks"), "{text}");
    assert!(text.contains("final test accuracy"), "{text}");

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/slurm/psrs.sbatch");
    let port = free_port().to_string();
    let out = slurm(
        &s,
        &[
            "sbatch",
            "--parsable",
            "-n",
            "5",
            "--output=job.out",
            script,
            "kv-test",
            "--keys",
            "500",
        ],
        &[("PSRS", &bin), ("DMLC_PS_ROOT_PORT", &port)],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let job = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let t = Instant::now();
    loop {
        let q = slurm(&s, &["squeue", "-h", "-j", &job], &[]);
        if String::from_utf8_lossy(&q.stdout).trim().is_empty() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "sbatch job {job} still queued");
        std::thread::sleep(Duration::from_millis(300));
    }
    let log = std::fs::read_to_string(s.dir.path().join("job.out")).unwrap_or_default();
    assert_eq!(log.matches("kv-test ok").count(), 2, "{log}");
}
