//! A seed replays exactly: the same run, message for message.

use ps_sim::{run_traced, Outcome, SimConfig};

fn story(o: &Outcome) -> String {
    match o {
        Outcome::Passed { at_ms, steps } => format!("passed {at_ms} {steps}"),
        Outcome::Beyond { why, log } => format!("beyond {why}\n{}", log.join("\n")),
        Outcome::Failed { violation, log } => format!("failed {violation:?}\n{}", log.join("\n")),
    }
}

#[test]
fn a_seed_replays_the_same_run() {
    let cfg = SimConfig::default();
    for seed in [3, 17] {
        let a = run_traced(&cfg, seed, true);
        let b = run_traced(&cfg, seed, true);
        assert_eq!(story(&a), story(&b), "seed {seed} ran differently twice");
    }
    assert_ne!(
        story(&run_traced(&cfg, 3, true)),
        story(&run_traced(&cfg, 4, true)),
        "two seeds, one run"
    );
}
