use super::*;
use crate::auth::secret::SecretSource;

fn secret(b: u8) -> Secret {
    Secret::new(vec![b; 32], SecretSource::File).unwrap()
}

/// Runs a whole handshake; returns both sides' keys or the first refusal.
fn run(
    i_secret: Option<&Secret>,
    i_enc: bool,
    r_secret: Option<&Secret>,
    r_enc: bool,
) -> Result<(Option<SessionKey>, Option<SessionKey>), Refusal> {
    let (init, hello) = Initiator::new(i_secret, i_enc, [1; 32]);
    let resp = Responder::new(r_secret, r_enc);
    match resp.on_hello(&hello, [2; 32])? {
        AfterHello::Open => Ok((None, None)),
        AfterHello::Challenge { reply, pending } => {
            let (proof, ki) = init.on_challenge(&reply)?;
            let kr = pending.on_proof(&proof)?;
            Ok((ki, kr))
        }
    }
}

#[test]
fn same_secret_agrees_on_a_key() {
    let s = secret(1);
    let (ki, kr) = run(Some(&s), true, Some(&s), true).unwrap();
    assert!(ki.is_some());
    assert_eq!(ki, kr);
    assert_eq!(run(Some(&s), false, Some(&s), false).unwrap(), (None, None));
    assert_eq!(run(None, true, None, true).unwrap(), (None, None));
}

#[test]
fn mismatches_are_refused_with_their_cause() {
    let (a, b) = (secret(1), secret(2));
    // the initiator checks the responder first: a wrong secret fails there
    assert_eq!(run(Some(&a), true, Some(&b), true), Err(Refusal::BadProof));
    assert_eq!(run(None, true, Some(&a), true), Err(Refusal::PeerHasNoSecret));
    assert_eq!(run(Some(&a), true, None, true), Err(Refusal::NoSecretHere));
    assert_eq!(run(Some(&a), false, Some(&a), true), Err(Refusal::EncryptionMismatch));
    let r = Responder::new(Some(&a), true);
    assert!(matches!(r.on_hello(&[b'G'; HELLO_LEN], [0; 32]), Err(Refusal::NotPsrs)));
    let (_, mut hello) = Initiator::new(Some(&a), true, [1; 32]);
    hello[4] = 9;
    assert!(matches!(r.on_hello(&hello, [0; 32]), Err(Refusal::Version(9, 2))));
    for e in [Refusal::BadProof, Refusal::NotPsrs, Refusal::PeerHasNoSecret] {
        assert!(!e.to_string().contains('\n'));
    }
}

#[test]
fn a_wrong_secret_initiator_is_refused_by_the_responder() {
    // an initiator that skips checking the challenge (an intruder) still cannot prove
    let (a, b) = (secret(1), secret(2));
    let (_, hello) = Initiator::new(Some(&b), true, [1; 32]);
    let AfterHello::Challenge { pending, .. } = Responder::new(Some(&a), true).on_hello(&hello, [2; 32]).unwrap()
    else {
        panic!("expected a challenge");
    };
    let mut forged = [0u8; PROOF_LEN];
    forged[..4].copy_from_slice(b"PSAP");
    forged[4..].copy_from_slice(&b.mac(&[INITIATOR, &[1; 32], &[2; 32]]));
    assert_eq!(pending.on_proof(&forged), Err(Refusal::BadProof));
    assert_eq!(pending.on_proof(&[0; PROOF_LEN]), Err(Refusal::Malformed("proof")));
}

#[test]
fn replayed_handshake_bytes_fail_against_a_fresh_nonce() {
    let s = secret(3);
    let (init, hello) = Initiator::new(Some(&s), true, [5; 32]);
    let resp = Responder::new(Some(&s), true);
    let AfterHello::Challenge { reply, .. } = resp.on_hello(&hello, [6; 32]).unwrap() else {
        panic!("expected a challenge");
    };
    let (captured_proof, _) = init.on_challenge(&reply).unwrap();
    // the same HELLO and PROOF bytes on a new connection: the responder's nonce differs
    let AfterHello::Challenge { pending, .. } = resp.on_hello(&hello, [7; 32]).unwrap() else {
        panic!("expected a challenge");
    };
    assert_eq!(pending.on_proof(&captured_proof), Err(Refusal::BadProof));
    // a captured challenge replayed to another initiator (another nonce) fails too
    let (other, _) = Initiator::new(Some(&s), true, [8; 32]);
    assert_eq!(other.on_challenge(&reply).unwrap_err(), Refusal::BadProof);
}

/// Garbage is refused on its first bytes, a HELLO cut short is not (failure test: an
/// HTTP request that closes after 18 bytes is "not a psrs handshake").
#[test]
fn the_first_bytes_tell_garbage_from_a_hello() {
    let (_, hello) = Initiator::new(None, true, [1; 32]);
    for n in 1..=hello.len() {
        assert!(Responder::could_be_hello(&hello[..n]), "{n} bytes of a HELLO");
    }
    assert!(!Responder::could_be_hello(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(!Responder::could_be_hello(b"PSRS"));
    assert!(!Responder::could_be_hello(b"Q"));
}
