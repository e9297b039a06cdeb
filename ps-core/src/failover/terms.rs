//! Which candidate may run in which term: term `t` (from 1) belongs to candidate
//! `(t - 1) mod n` alone, as views do in Viewstamped Replication. Two candidates can
//! then never act in one term, whatever the nodes remember of earlier votes: a
//! candidate taking over picks its next own term above every term it has heard of.

/// The candidate that owns `term` among `n` (term 0 is nobody's; candidate 0 then).
pub fn owner(term: u64, n: usize) -> usize {
    if term == 0 || n == 0 {
        return 0;
    }
    ((term - 1) % n as u64) as usize
}

/// Candidate `me`'s first own term above `above`, among `n` candidates.
pub fn next_term(me: usize, above: u64, n: usize) -> u64 {
    let n = n.max(1) as u64;
    let me = me as u64 % n;
    // terms of `me`: me+1, me+1+n, ...
    let first = me + 1;
    if above < first {
        return first;
    }
    first + ((above - first) / n + 1) * n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_rotate_over_the_candidates() {
        assert_eq!(
            (1..=7).map(|t| owner(t, 3)).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1, 2, 0]
        );
        assert_eq!(next_term(0, 0, 3), 1);
        assert_eq!(next_term(1, 1, 3), 2);
        assert_eq!(next_term(2, 2, 3), 3);
        assert_eq!(next_term(0, 3, 3), 4);
        assert_eq!(next_term(1, 2, 3), 5);
        assert_eq!(next_term(1, 1, 2), 2);
        assert_eq!(next_term(0, 2, 2), 3);
        for n in 1..5 {
            for me in 0..n {
                for above in 0..20 {
                    let t = next_term(me, above, n);
                    assert!(
                        t > above && owner(t, n) == me && t - above <= n as u64,
                        "{me} {above} {n}"
                    );
                }
            }
        }
        assert_eq!(owner(0, 3), 0);
        assert_eq!(next_term(0, 0, 1), 1);
        assert_eq!(next_term(0, 5, 1), 6);
    }
}
