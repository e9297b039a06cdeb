//! `psrs kv-test`: ps-lite's test_kv_app. Servers keep sums (ps-lite's
//! `KVServerDefaultHandle` over float32: pushes add up, pulls answer the sums); every
//! worker pushes the same values `--repeat` times, waits for the other workers, pulls,
//! and checks that each value is exactly `repeat × workers ×` what it pushed (with
//! `--own-keys`: its own keys, `repeat ×`). A server with `--apps N` serves apps 0 to
//! N - 1, each with its own sums.

use clap::Args as ClapArgs;
use ps_core::kv::handles::{sum_handle, sum_handle_with_copy};
use ps_core::kv::{KVPairs, KVServer, KVWorker};
use ps_core::node::WORKER_GROUP;
use ps_core::Role;

/// Arguments of `psrs kv-test`.
#[derive(ClapArgs)]
pub struct Args {
    /// Keys per push (spread over the whole key space, so every server gets some).
    #[arg(long, default_value_t = 10_000)]
    keys: usize,
    /// Pushes per worker.
    #[arg(long, default_value_t = 50)]
    repeat: usize,
    /// Give key i `1 + i % 3` values instead of one.
    #[arg(long)]
    uneven: bool,
    /// Also check empty and single-key requests, and that unsorted keys are refused.
    #[arg(long)]
    edge_cases: bool,
    /// Pause this long after each push (and print `kv-test pushed N` every 10
    /// pushes), so a test can kill a server in the middle of the pushes.
    #[arg(long, default_value_t = 0)]
    interval_ms: u64,
    /// Push keys of this worker's own (the same spread, offset by 2^32 + its rank, so
    /// they are no key ps-lite's test_kv_app uses) and expect each value to be exactly
    /// `--repeat` times what it pushed, without a barrier of the workers: for
    /// clusters whose other workers are not `kv-test` (ps-lite's test_kv_app).
    #[arg(long)]
    own_keys: bool,
    /// As a server, serve apps 0 to N - 1, each with a store of its own (a worker
    /// uses app 0).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(i32).range(1..=64))]
    apps: i32,
}

const APP: i32 = 0;

/// Runs the test on this node and finalizes.
pub fn run(a: Args) -> Result<(), super::error::CliError> {
    let po = super::start_node()?;
    match po.role() {
        Role::Server => {
            // with PS_REPLICAS a replacement copies its key ranges from live replicas
            let (handle, copy) = sum_handle_with_copy();
            let _server = KVServer::<f32>::with_copy(&po, APP, handle, Some(copy))?;
            let _others = (APP + 1..a.apps)
                .map(|app| KVServer::<f32>::new(&po, app, sum_handle()))
                .collect::<Result<Vec<_>, _>>()?;
            po.finalize(true);
        }
        Role::Worker => {
            let kv = KVWorker::<f32>::new(&po, APP)?;
            let result = worker(&po, &kv, &a);
            if let Err(e) = &result {
                eprintln!("kv-test failed: {e}");
            }
            drop(kv);
            po.finalize(true);
            result?;
        }
        Role::Scheduler => po.finalize(true),
    }
    Ok(())
}

fn worker(po: &ps_core::Postoffice, kv: &KVWorker<f32>, a: &Args) -> Result<(), String> {
    let me = po.my_id();
    let n = a.keys as u64;
    let offset = if a.own_keys {
        (1u64 << 32) + po.my_rank() as u64
    } else {
        0
    };
    let keys: Vec<u64> = (0..n).map(|i| i * (u64::MAX / n.max(1)) + offset).collect();
    let lens: Vec<i32> = if a.uneven {
        (0..a.keys).map(|i| 1 + (i % 3) as i32).collect()
    } else {
        Vec::new()
    };
    let total = if a.uneven {
        lens.iter().sum::<i32>() as usize
    } else {
        a.keys
    };
    let vals: Vec<f32> = (0..total).map(|i| (i % 100) as f32 + 1.0).collect();
    let pairs = KVPairs::new(keys.clone(), vals.clone(), lens.clone());
    let mut ts = Vec::new();
    for i in 0..a.repeat {
        ts.push(kv.zpush(pairs.clone(), 0).map_err(|e| e.to_string())?);
        if a.interval_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(a.interval_ms));
            if (i + 1) % 10 == 0 {
                println!("kv-test pushed {}", i + 1);
            }
        }
    }
    for t in ts {
        kv.wait(t).map_err(|e| e.to_string())?;
    }
    if !a.own_keys {
        po.barrier(WORKER_GROUP);
    }
    let got = kv
        .wait_pull(kv.pull(&keys, 0).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let pushers = if a.own_keys { 1 } else { po.num_workers() };
    let times = (a.repeat * pushers) as f32;
    if got.vals.len() != vals.len() {
        return Err(format!("pulled {} values, pushed {}", got.vals.len(), vals.len()));
    }
    if a.uneven && got.lens[..] != lens[..] {
        return Err("pulled lengths differ from the pushed ones".into());
    }
    if let Some(i) = (0..vals.len()).find(|&i| got.vals[i] != vals[i] * times) {
        return Err(format!("value {i}: expected {} got {}", vals[i] * times, got.vals[i]));
    }
    println!(
        "kv-test ok: worker {me} checked {} values = {times} x pushed",
        vals.len()
    );
    if a.edge_cases {
        edge_cases(kv)?;
        println!("kv-test edge cases ok: worker {me}");
    }
    Ok(())
}

fn edge_cases(kv: &KVWorker<f32>) -> Result<(), String> {
    let e = |e: ps_core::kv::KvError| e.to_string();
    // empty push and pull complete at once
    kv.wait(kv.push(&[], &[], &[], 0).map_err(e)?).map_err(e)?;
    let empty = kv.wait_pull(kv.pull(&[], 0).map_err(e)?).map_err(e)?;
    if !empty.keys.is_empty() {
        return Err("empty pull returned keys".into());
    }
    // a single key on the last server (pushed once by this worker only: read back its
    // own value plus whatever other workers pushed, so use a key no one else uses)
    let key = u64::MAX - 1 - kv_rank_salt(kv);
    kv.wait(kv.push(&[key], &[2.5], &[], 0).map_err(e)?).map_err(e)?;
    let one = kv.wait_pull(kv.pull(&[key], 0).map_err(e)?).map_err(e)?;
    if one.keys[..] != [key] || one.vals[..] != [2.5] {
        return Err(format!("single key: got {:?} = {:?}", one.keys, one.vals));
    }
    // unsorted keys are refused before anything is sent
    match kv.push(&[5, 3], &[1.0, 1.0], &[], 0) {
        Err(err) => println!("unsorted keys refused: {err}"),
        Ok(_) => return Err("unsorted keys were accepted".into()),
    }
    match kv.push(&[1, 2], &[1.0, 1.0, 1.0], &[], 0) {
        Err(err) => println!("mismatched values refused: {err}"),
        Ok(_) => return Err("3 values for 2 keys were accepted".into()),
    }
    answered_without_waiting(kv, key)
}

/// Two pushes back to back and no wait (the second goes lazily, behind the first's
/// answer): both must be answered while this thread only sleeps.
fn answered_without_waiting(kv: &KVWorker<f32>, key: u64) -> Result<(), String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let done = std::sync::Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let d = std::sync::Arc::clone(&done);
        let req = ps_core::kv::KvRequest::new(KVPairs::new(vec![key], vec![0.0], Vec::new()), 0, true, false);
        kv.request(req, Some(Box::new(move |_| _ = d.fetch_add(1, Ordering::SeqCst))))
            .map_err(|e| e.to_string())?;
    }
    let start = std::time::Instant::now();
    while done.load(Ordering::SeqCst) < 2 {
        if start.elapsed() > std::time::Duration::from_secs(10) {
            return Err(format!(
                "{} of 2 pushes answered within 10 s without a wait",
                done.load(Ordering::SeqCst)
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // a request answered through its callback is forgotten, not kept forever
    let kept = kv.pending_requests();
    if kept != 0 {
        return Err(format!("{kept} answered requests are still kept"));
    }
    println!("pushes answered without a wait");
    Ok(())
}

fn kv_rank_salt(_kv: &KVWorker<f32>) -> u64 {
    std::process::id() as u64
}
