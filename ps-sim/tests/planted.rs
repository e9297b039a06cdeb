//! Each kind of bug the invariants exist for, planted on purpose, is found within the
//! default seed count; and the seed that finds it passes without the bug (the failure
//! is the bug's, not the simulator's).

use ps_sim::{run, Outcome, Plant, SimConfig, DEFAULT_SEEDS};

/// The first seed (below the default count) whose run with `plant` breaks an
/// invariant, and what broke.
fn first_failure(plant: &str) -> (u64, String) {
    let cfg = SimConfig {
        plant: Plant::parse(plant).expect("a planted bug"),
        ..SimConfig::default()
    };
    for seed in 0..DEFAULT_SEEDS {
        if let Outcome::Failed { violation, .. } = run(&cfg, seed) {
            return (seed, violation.what);
        }
    }
    panic!("{plant}: no invariant broke within {DEFAULT_SEEDS} seeds");
}

fn found(plant: &str, expect: &[&str]) {
    let (seed, what) = first_failure(plant);
    eprintln!("{plant}: seed {seed}: {what}");
    assert!(
        expect.iter().any(|e| what.contains(e)),
        "{plant}: seed {seed} broke another invariant than the bug's: {what}"
    );
    let clean = run(&SimConfig::default(), seed);
    assert!(
        !matches!(clean, Outcome::Failed { .. }),
        "seed {seed} fails without the planted bug too: {clean:?}"
    );
}

#[test]
fn a_scheduler_without_a_lease_is_caught_acting_beside_another() {
    // two schedulers acting at once show as acts of an older term after a newer one,
    // or as what follows from them: a server declared dead by one and written to
    // through the other loses an acknowledged push, or a task two masters handed out
    // counts for both attempts
    found(
        "no-lease",
        &[
            "acted in term",
            "two schedulers acted",
            "does not hold it",
            "counted for two attempts",
        ],
    );
}

#[test]
fn a_server_answering_before_its_replica_is_caught_losing_a_push() {
    found("early-ack", &["push"]);
}

#[test]
fn a_queue_forgetting_a_pending_task_on_restart_is_caught() {
    found("forget-pending", &["task"]);
}

/// A scheduler that has just taken over, or got its lease back after a cut, counted
/// the silence from before it acted: it declared dead the nodes it could not hear,
/// which had just voted for it (a real partition evicted two live workers so).
#[test]
fn a_scheduler_counting_silence_from_before_it_acted_is_caught() {
    found("silence-before-acting", &["declared nodes dead"]);
}

/// A master that counts a task's result from any attempt trains a task twice in a
/// pass across a failover or a timeout (a real partition ended with 161 of 160).
#[test]
fn a_master_counting_a_task_from_two_attempts_is_caught() {
    found("count-every-attempt", &["counted for two attempts"]);
}

/// Candidates campaigning without pre-votes: the one cut off with a minority raises
/// its term meanwhile, and after the heal leadership changes more than once.
#[test]
fn elections_without_pre_votes_are_caught_changing_leadership_twice_after_a_heal() {
    found("no-pre-vote", &["won after the heal"]);
}
