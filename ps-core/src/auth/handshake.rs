//! The connection-start handshake, as pure functions over byte arrays (no I/O; the
//! nonces are passed in, so tests are deterministic).
//!
//! The side that opened the connection (initiator, I) and the side that accepted it
//! (responder, R):
//!
//! ```text
//! I → R  HELLO      "PSAH" version mode 0 0 nonce_i[32]                        40 bytes
//!        (mode 0, open cluster: nothing more; messages follow)
//! R → I  CHALLENGE  "PSAC" nonce_r[32] HMAC(secret, "psrs-v1 responder"‖nonce_i‖nonce_r)   68
//! I → R  PROOF      "PSAP" HMAC(secret, "psrs-v1 initiator"‖nonce_i‖nonce_r)              36
//! ```
//!
//! Each side proves it holds the secret over both sides' fresh nonces (mutual
//! challenge-response; tags compared in constant time), so handshake bytes captured
//! from a real connection are worthless on another one. With mode 2 (sealed) the
//! initiator → responder stream is then encrypted with a key derived by HKDF from the
//! secret and both nonces ([`super::seal`]). Any mismatch (no secret on one side,
//! encryption on one side only, wrong secret) is a [`Refusal`] naming the cause.

use super::secret::Secret;
use std::fmt;

const VERSION: u8 = 1;
/// Bytes of a HELLO.
pub const HELLO_LEN: usize = 40;
/// Bytes of a CHALLENGE.
pub const CHALLENGE_LEN: usize = 68;
/// Bytes of a PROOF.
pub const PROOF_LEN: usize = 36;
const RESPONDER: &[u8] = b"psrs-v1 responder";
const INITIATOR: &[u8] = b"psrs-v1 initiator";

/// What a connection is: open (no secret), authenticated, or authenticated and sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No secret: nothing is checked.
    Open = 0,
    /// Authenticated, messages in the clear.
    Auth = 1,
    /// Authenticated and encrypted (initiator → responder).
    Sealed = 2,
}

impl Mode {
    /// The mode of a node with `secret` and the encryption setting `encrypt`.
    pub fn of(secret: Option<&Secret>, encrypt: bool) -> Mode {
        match (secret, encrypt) {
            (None, _) => Mode::Open,
            (Some(_), false) => Mode::Auth,
            (Some(_), true) => Mode::Sealed,
        }
    }
}

/// Why a handshake failed; `Display` is one line with the likely cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The first bytes are not a psrs HELLO (not psrs, or an older psrs).
    NotPsrs,
    /// A psrs HELLO of another protocol version or mode byte.
    Version(u8, u8),
    /// The peer is open (no secret) but this node has one.
    PeerHasNoSecret,
    /// The peer has a secret but this node has none.
    NoSecretHere,
    /// One side encrypts and the other does not.
    EncryptionMismatch,
    /// The peer's tag is wrong: a different secret, or replayed handshake bytes.
    BadProof,
    /// A CHALLENGE or PROOF that is not one.
    Malformed(&'static str),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotPsrs => write!(f, "not a psrs handshake"),
            Refusal::Version(v, m) => write!(f, "psrs handshake version {v} mode {m} is not supported"),
            Refusal::PeerHasNoSecret => write!(f, "the peer has no cluster secret (PS_SECRET_FILE) but this node has"),
            Refusal::NoSecretHere => write!(f, "the peer uses a cluster secret but this node has none"),
            Refusal::EncryptionMismatch => write!(f, "PS_ENCRYPT differs between the peer and this node"),
            Refusal::BadProof => write!(f, "authentication failed (wrong secret or replayed handshake)"),
            Refusal::Malformed(what) => write!(f, "malformed {what}"),
        }
    }
}

/// The key sealing the initiator → responder stream.
pub type SessionKey = [u8; 32];

fn session_key(secret: &Secret, ni: &[u8; 32], nr: &[u8; 32]) -> SessionKey {
    let mut salt = [0u8; 64];
    salt[..32].copy_from_slice(ni);
    salt[32..].copy_from_slice(nr);
    secret.derive(&salt, "psrs-v1 initiator to responder")
}

/// The initiator's side.
pub struct Initiator {
    secret: Option<Secret>,
    mode: Mode,
    nonce: [u8; 32],
}

impl Initiator {
    /// Starts a handshake with the fresh `nonce`; returns the HELLO to send.
    pub fn new(secret: Option<&Secret>, encrypt: bool, nonce: [u8; 32]) -> (Initiator, [u8; HELLO_LEN]) {
        let mode = Mode::of(secret, encrypt);
        let mut hello = [0u8; HELLO_LEN];
        hello[..4].copy_from_slice(b"PSAH");
        hello[4] = VERSION;
        hello[5] = mode as u8;
        hello[8..].copy_from_slice(&nonce);
        let me = Initiator {
            secret: secret.cloned(),
            mode,
            nonce,
        };
        (me, hello)
    }

    /// The mode this side asked for (open: the handshake is over after the HELLO).
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Checks the responder's CHALLENGE; returns the PROOF to send and, when sealed,
    /// the session key.
    pub fn on_challenge(&self, c: &[u8; CHALLENGE_LEN]) -> Result<([u8; PROOF_LEN], Option<SessionKey>), Refusal> {
        let secret = self
            .secret
            .as_ref()
            .ok_or(Refusal::Malformed("challenge to an open node"))?;
        if &c[..4] != b"PSAC" {
            return Err(Refusal::Malformed("challenge"));
        }
        let nr: [u8; 32] = c[4..36].try_into().expect("32 bytes");
        if !secret.verify(&[RESPONDER, &self.nonce, &nr], &c[36..]) {
            return Err(Refusal::BadProof);
        }
        let mut proof = [0u8; PROOF_LEN];
        proof[..4].copy_from_slice(b"PSAP");
        proof[4..].copy_from_slice(&secret.mac(&[INITIATOR, &self.nonce, &nr]));
        let key = (self.mode == Mode::Sealed).then(|| session_key(secret, &self.nonce, &nr));
        Ok((proof, key))
    }
}

/// The responder's side (a node accepting connections).
pub struct Responder {
    secret: Option<Secret>,
    mode: Mode,
}

/// What the responder does after a HELLO.
pub enum AfterHello {
    /// Open cluster: the connection is accepted, messages follow.
    Open,
    /// Send `reply`, then check the PROOF with `pending`.
    Challenge {
        /// The CHALLENGE to send.
        reply: [u8; CHALLENGE_LEN],
        /// Checks the PROOF.
        pending: Pending,
    },
}

/// A responder waiting for the initiator's PROOF.
pub struct Pending {
    secret: Secret,
    mode: Mode,
    ni: [u8; 32],
    nr: [u8; 32],
}

impl Responder {
    /// A responder with this node's secret and encryption setting.
    pub fn new(secret: Option<&Secret>, encrypt: bool) -> Responder {
        Responder {
            secret: secret.cloned(),
            mode: Mode::of(secret, encrypt),
        }
    }

    /// Whether `start`, the first bytes a peer sent, can begin a HELLO: a peer whose
    /// first bytes cannot is refused as not psrs at once, even if it then closes
    /// before a whole HELLO (a closed, half-sent HELLO is not held against the peer).
    pub fn could_be_hello(start: &[u8]) -> bool {
        let n = start.len().min(4);
        start[..n] == b"PSAH"[..n]
    }

    /// Checks a HELLO; `nonce` is this side's fresh nonce.
    pub fn on_hello(&self, h: &[u8; HELLO_LEN], nonce: [u8; 32]) -> Result<AfterHello, Refusal> {
        if &h[..4] != b"PSAH" {
            return Err(Refusal::NotPsrs);
        }
        let (version, mode) = (h[4], h[5]);
        let peer = match (version, mode) {
            (VERSION, 0) => Mode::Open,
            (VERSION, 1) => Mode::Auth,
            (VERSION, 2) => Mode::Sealed,
            _ => return Err(Refusal::Version(version, mode)),
        };
        match (self.mode, peer) {
            (Mode::Open, Mode::Open) => return Ok(AfterHello::Open),
            (Mode::Open, _) => return Err(Refusal::NoSecretHere),
            (_, Mode::Open) => return Err(Refusal::PeerHasNoSecret),
            (a, b) if a != b => return Err(Refusal::EncryptionMismatch),
            _ => {}
        }
        let secret = self.secret.clone().expect("a mode other than open has a secret");
        let ni: [u8; 32] = h[8..].try_into().expect("32 bytes");
        let mut reply = [0u8; CHALLENGE_LEN];
        reply[..4].copy_from_slice(b"PSAC");
        reply[4..36].copy_from_slice(&nonce);
        reply[36..].copy_from_slice(&secret.mac(&[RESPONDER, &ni, &nonce]));
        Ok(AfterHello::Challenge {
            reply,
            pending: Pending {
                secret,
                mode: self.mode,
                ni,
                nr: nonce,
            },
        })
    }
}

impl Pending {
    /// Checks the PROOF; returns the session key when sealed.
    pub fn on_proof(&self, p: &[u8; PROOF_LEN]) -> Result<Option<SessionKey>, Refusal> {
        if &p[..4] != b"PSAP" {
            return Err(Refusal::Malformed("proof"));
        }
        if !self.secret.verify(&[INITIATOR, &self.ni, &self.nr], &p[4..]) {
            return Err(Refusal::BadProof);
        }
        Ok((self.mode == Mode::Sealed).then(|| session_key(&self.secret, &self.ni, &self.nr)))
    }
}

#[cfg(test)]
#[path = "handshake_tests.rs"]
mod tests;
