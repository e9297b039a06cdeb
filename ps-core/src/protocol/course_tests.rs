use super::*;
use std::cell::Cell;

/// A node whose table and barrier releases the test sets.
#[derive(Default)]
struct Node {
    table: Cell<bool>,
    replacement: bool,
    /// Barriers entered.
    entered: Cell<u32>,
    /// `enter` finds nothing to wait for.
    alone: bool,
    /// Barrier releases not yet seen.
    releases: Cell<u32>,
}

impl Gates for Node {
    type Ask = u32;
    fn has_table(&self) -> bool {
        self.table.get()
    }
    fn waits_at_start(&self) -> bool {
        !self.replacement
    }
    fn enter(&self) -> Option<u32> {
        self.entered.set(self.entered.get() + 1);
        (!self.alone).then(|| self.entered.get())
    }
    fn released(&self, _: &mut u32) -> bool {
        let r = self.releases.get();
        self.releases.set(r.saturating_sub(1));
        r > 0
    }
}

#[test]
fn joins_then_waits_at_the_start_barrier_then_runs_once() {
    let n = Node::default();
    let mut c = Course::new(true);
    assert!(!c.step(&n));
    assert_eq!(c.stage(), Stage::Joining);
    n.table.set(true);
    assert!(!c.step(&n));
    assert_eq!((c.stage(), n.entered.get()), (Stage::Starting, 1));
    assert!(!c.step(&n), "not released yet");
    assert!(!c.passed_start_barrier());
    n.releases.set(1);
    assert!(c.step(&n), "the application starts at the release");
    assert_eq!(c.stage(), Stage::Running);
    assert!(c.passed_start_barrier());
    assert!(!c.step(&n), "and only once");
    assert_eq!(n.entered.get(), 1);
}

#[test]
fn a_replacement_or_a_course_without_start_barrier_runs_at_its_table() {
    for (replacement, start_barrier) in [(true, true), (false, false)] {
        let n = Node {
            replacement,
            ..Node::default()
        };
        let mut c = Course::new(start_barrier);
        n.table.set(true);
        assert!(c.step(&n));
        assert_eq!((c.stage(), n.entered.get()), (Stage::Running, 0));
        assert!(!c.passed_start_barrier(), "it never waited there");
    }
}

#[test]
fn a_barrier_with_nothing_to_wait_for_is_passed_in_the_same_step() {
    let n = Node {
        alone: true,
        ..Node::default()
    };
    n.table.set(true);
    let mut c = Course::new(true);
    assert!(c.step(&n));
    assert_eq!(c.stage(), Stage::Running);
    c.finish(&n, true);
    assert_eq!(c.stage(), Stage::Finalizing);
    assert!(!c.step(&n));
    assert_eq!((c.stage(), n.entered.get()), (Stage::Done, 2));
}

#[test]
fn the_final_barrier_ends_the_course_at_its_release() {
    let n = Node::default();
    n.table.set(true);
    let mut c = Course::new(true);
    assert!(!c.step(&n));
    n.releases.set(1);
    assert!(c.step(&n));
    c.finish(&n, true);
    for _ in 0..3 {
        assert!(!c.step(&n));
        assert_eq!(c.stage(), Stage::Finalizing);
    }
    n.releases.set(1);
    assert!(!c.step(&n), "the application does not start again");
    assert_eq!(c.stage(), Stage::Done);
    c.finish(&n, true);
    assert_eq!(
        (c.stage(), n.entered.get()),
        (Stage::Done, 2),
        "a done course stays done"
    );
}

#[test]
fn finishing_without_the_final_barrier_or_before_running_ends_at_once() {
    let n = Node::default();
    let mut c: Course<u32> = Course::new(true);
    c.finish(&n, false);
    assert_eq!((c.stage(), n.entered.get()), (Stage::Done, 0));
    n.table.set(true);
    assert!(!c.step(&n), "a finished course never starts the application");
    let mut c: Course<u32> = Course::new(true);
    c.finish(&n, true);
    assert_eq!(
        c.stage(),
        Stage::Finalizing,
        "a failed start still meets the others at the end"
    );
}
