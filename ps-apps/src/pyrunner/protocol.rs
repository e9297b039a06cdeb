//! What a worker and its Python runner say to each other, as bytes. A frame is a
//! 4-byte little-endian length of the rest, a 4-byte little-endian length of a JSON
//! header, the header, then binary data (a batch of float32 features or logits, or the
//! raw bytes of records). Requests: `load` (a job's model), `forward` (a TorchScript
//! model over a float32 matrix), `call` (the user's function over a list of inputs).
//! Every reply says `ok`, or carries the one-line `error` the Python code raised.
//! Pure: no I/O beyond `Read`, so every check is unit-tested.

use super::error::RunnerError;
use serde::{Deserialize, Serialize};
use std::io::Read;

/// Largest frame accepted either way (1 GiB): a longer length prefix is a broken
/// runner, not a batch.
pub const MAX_FRAME: usize = 1 << 30;

/// The model a runner loads for a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserModel {
    /// A TorchScript file (`torch.jit.save`): float32 `[N, features]` → logits `[N, classes]`.
    Torch(String),
    /// `module:function` (importable with `pythonpath` first on `sys.path`): a list of
    /// inputs → one output per input.
    Runner {
        /// `module:function`.
        function: String,
        /// A directory put first on `sys.path` while the job's function is loaded.
        pythonpath: Option<String>,
    },
}

/// What a `call` passes to the user's function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inputs {
    /// File paths (a directory dataset), passed as `str`.
    Paths(Vec<String>),
    /// Records' raw bytes (a RecordIO dataset), passed as `bytes`.
    Bytes(Vec<Vec<u8>>),
}

impl Inputs {
    /// How many inputs.
    pub fn len(&self) -> usize {
        match self {
            Inputs::Paths(p) => p.len(),
            Inputs::Bytes(b) => b.len(),
        }
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A request header (the `op` field names it).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Header {
    Load {
        job: u32,
        #[serde(flatten)]
        model: LoadModel,
        threads: usize,
    },
    Warm {
        job: u32,
        #[serde(flatten)]
        model: LoadModel,
        threads: usize,
    },
    Drop {
        job: u32,
    },
    Preload {
        modules: Vec<String>,
    },
    Status {},
    Forward {
        job: u32,
        rows: usize,
        cols: usize,
    },
    Call {
        job: u32,
        inputs: String,
        paths: Vec<String>,
        lens: Vec<usize>,
    },
}

/// How far a model's load got in a runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelState {
    /// Queued or being built by the runner's loader thread.
    Loading,
    /// Built: the job's queries can run.
    Ready,
    /// Its load raised (the error says why).
    Failed,
}

/// One model a runner holds, as its `status` reply says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelStatus {
    /// The job it is for.
    pub job: u32,
    /// Loading, ready or failed.
    pub state: ModelState,
    /// Why its load failed (one line).
    #[serde(default)]
    pub error: Option<String>,
    /// Its memory: the bytes of the tensors it holds (torch modules' parameters and
    /// buffers, tensors, numpy arrays among the module's globals), or the runner's
    /// growth in resident memory during the load when it holds none.
    #[serde(default)]
    pub bytes: u64,
    /// The runner's growth in resident memory during the load (libraries imported
    /// for it included; other threads' allocations meanwhile too), bytes.
    #[serde(default)]
    pub rss_growth: i64,
    /// How long the load took, seconds (wall clock).
    #[serde(default)]
    pub load_s: f64,
    /// CPU time of the loader thread during the load, seconds.
    #[serde(default)]
    pub cpu_s: f64,
    /// How long ago it became ready, ms (ready models only).
    #[serde(default)]
    pub ready_ago_ms: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
struct LoadModel {
    #[serde(skip_serializing_if = "Option::is_none")]
    torch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    runner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pythonpath: Option<String>,
}

/// A reply header.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the request succeeded.
    pub ok: bool,
    /// Why not: the exception's type and message, one line.
    #[serde(default)]
    pub error: Option<String>,
    /// `forward`: rows of the logits in the binary part.
    #[serde(default)]
    pub rows: Option<usize>,
    /// `forward`: columns (classes).
    #[serde(default)]
    pub cols: Option<usize>,
    /// `call`: each input's output as CSV fields.
    #[serde(default)]
    pub outputs: Option<Vec<Vec<String>>>,
    /// The greeting a runner sends once started: its pid.
    #[serde(default)]
    pub pid: Option<u32>,
    /// The greeting: the Python version.
    #[serde(default)]
    pub python: Option<String>,
    /// `status`: every model the runner holds, by job.
    #[serde(default)]
    pub models: Option<Vec<ModelStatus>>,
    /// `status`: the runner's resident memory, bytes.
    #[serde(default)]
    pub rss: Option<u64>,
}

/// A frame: its JSON header and binary part.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// The header (JSON text).
    pub header: Vec<u8>,
    /// The binary part.
    pub tail: Vec<u8>,
}

/// Encodes a frame of `header` (JSON) and `tail`.
pub fn encode(header: &[u8], tail: &[u8]) -> Vec<u8> {
    let rest = 4 + header.len() + tail.len();
    let mut out = Vec::with_capacity(4 + rest);
    out.extend_from_slice(&(rest as u32).to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(tail);
    out
}

/// Reads one frame; `Ok(None)` at a clean end of stream (no byte of a frame read).
pub fn read_frame(r: &mut impl Read) -> Result<Option<Frame>, RunnerError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(RunnerError::Protocol("the stream ended inside a frame's length".into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RunnerError::Protocol(format!("reading a frame: {e}"))),
        }
    }
    let rest = u32::from_le_bytes(len) as usize;
    if !(4..=MAX_FRAME).contains(&rest) {
        return Err(RunnerError::Protocol(format!("a frame of {rest} bytes")));
    }
    let mut body = vec![0u8; rest];
    r.read_exact(&mut body)
        .map_err(|e| RunnerError::Protocol(format!("the stream ended inside a frame: {e}")))?;
    let hlen = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
    if hlen > rest - 4 {
        return Err(RunnerError::Protocol(format!(
            "a header of {hlen} bytes in a frame of {rest}"
        )));
    }
    let tail = body.split_off(4 + hlen);
    body.drain(..4);
    Ok(Some(Frame { header: body, tail }))
}

fn header(h: &Header) -> Vec<u8> {
    serde_json::to_vec(h).expect("request headers serialize")
}

fn load_model(model: &UserModel) -> LoadModel {
    match model {
        UserModel::Torch(p) => LoadModel {
            torch: Some(p.clone()),
            runner: None,
            pythonpath: None,
        },
        UserModel::Runner { function, pythonpath } => LoadModel {
            torch: None,
            runner: Some(function.clone()),
            pythonpath: pythonpath.clone(),
        },
    }
}

/// The frame asking the runner to load `model` for `job` (with `threads` for torch),
/// answered once it is loaded or its load failed. A model already held for `job` is
/// kept; the runner's other models too.
pub fn load(job: u32, model: &UserModel, threads: usize) -> Vec<u8> {
    let model = load_model(model);
    encode(&header(&Header::Load { job, model, threads }), &[])
}

/// The frame asking the runner to start loading `model` for `job` in the background,
/// answered at once (its `status` says when it is ready).
pub fn warm(job: u32, model: &UserModel, threads: usize) -> Vec<u8> {
    let model = load_model(model);
    encode(&header(&Header::Warm { job, model, threads }), &[])
}

/// The frame asking the runner to forget `job`'s model.
pub fn drop_model(job: u32) -> Vec<u8> {
    encode(&header(&Header::Drop { job }), &[])
}

/// The frame asking the runner to import `modules` in the background, before any
/// model asked for after it (answered at once).
pub fn preload(modules: &[String]) -> Vec<u8> {
    encode(
        &header(&Header::Preload {
            modules: modules.to_vec(),
        }),
        &[],
    )
}

/// The frame asking for the runner's models and memory.
pub fn status() -> Vec<u8> {
    encode(&header(&Header::Status {}), &[])
}

/// The frame running `job`'s TorchScript model over `x` (`rows × cols`, row-major).
pub fn forward(job: u32, x: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    debug_assert_eq!(x.len(), rows * cols);
    encode(&header(&Header::Forward { job, rows, cols }), bytemuck::cast_slice(x))
}

/// The frame calling `job`'s function over `inputs`.
pub fn call(job: u32, inputs: &Inputs) -> Vec<u8> {
    match inputs {
        Inputs::Paths(p) => encode(
            &header(&Header::Call {
                job,
                inputs: "paths".into(),
                paths: p.clone(),
                lens: Vec::new(),
            }),
            &[],
        ),
        Inputs::Bytes(b) => encode(
            &header(&Header::Call {
                job,
                inputs: "bytes".into(),
                paths: Vec::new(),
                lens: b.iter().map(Vec::len).collect(),
            }),
            &b.concat(),
        ),
    }
}

/// Reads a reply frame's header: the runner's error if it says `ok: false`.
pub fn reply(f: &Frame) -> Result<Reply, RunnerError> {
    let r: Reply = serde_json::from_slice(&f.header)
        .map_err(|e| RunnerError::Protocol(format!("a reply that is not the runner's JSON: {e}")))?;
    if !r.ok {
        let why = r.error.unwrap_or_else(|| "failed, saying nothing".into());
        return Err(RunnerError::Raised(why.lines().next().unwrap_or("").to_string()));
    }
    Ok(r)
}

/// Checks a `forward` reply for `rows` inputs: logits `[rows, classes]`, classes ≥ 1.
/// Returns the logits (row-major) and the number of classes.
pub fn logits(f: &Frame, rows: usize) -> Result<(Vec<f32>, usize), RunnerError> {
    let r = reply(f)?;
    let (Some(n), Some(c)) = (r.rows, r.cols) else {
        return Err(RunnerError::Protocol("a forward reply without its shape".into()));
    };
    if n != rows || c == 0 {
        return Err(RunnerError::Raised(format!(
            "the model returned shape [{n}, {c}] for {rows} inputs: it must return logits [N, classes]"
        )));
    }
    if f.tail.len() != n * c * 4 {
        return Err(RunnerError::Protocol(format!(
            "{} bytes of logits for shape [{n}, {c}]",
            f.tail.len()
        )));
    }
    let v: Vec<f32> = f
        .tail
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    Ok((v, c))
}

/// Reads a `status` reply: the runner's models (by job) and its resident memory.
pub fn models(f: &Frame) -> Result<(Vec<ModelStatus>, u64), RunnerError> {
    let r = reply(f)?;
    let models = r
        .models
        .ok_or_else(|| RunnerError::Protocol("a status reply without models".into()))?;
    Ok((models, r.rss.unwrap_or(0)))
}

/// Checks a `call` reply for `n` inputs: exactly one output (a list of CSV fields) each.
pub fn outputs(f: &Frame, n: usize) -> Result<Vec<Vec<String>>, RunnerError> {
    let r = reply(f)?;
    let out = r
        .outputs
        .ok_or_else(|| RunnerError::Protocol("a call reply without outputs".into()))?;
    if out.len() != n {
        return Err(RunnerError::Raised(format!(
            "the function returned {} outputs for {n} inputs: it must return one per input",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn parse(bytes: &[u8]) -> Frame {
        read_frame(&mut Cursor::new(bytes)).unwrap().unwrap()
    }

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut stream = encode(b"{\"a\":1}", b"xyz");
        stream.extend(encode(b"{}", b""));
        let mut c = Cursor::new(stream);
        let f = read_frame(&mut c).unwrap().unwrap();
        assert_eq!(
            (f.header.as_slice(), f.tail.as_slice()),
            (&b"{\"a\":1}"[..], &b"xyz"[..])
        );
        let f = read_frame(&mut c).unwrap().unwrap();
        assert_eq!((f.header.as_slice(), f.tail.len()), (&b"{}"[..], 0));
        assert!(read_frame(&mut c).unwrap().is_none(), "clean end");
    }

    #[test]
    fn broken_frames_are_protocol_errors() {
        let whole = encode(b"{}", b"abc");
        for cut in [2, 6, whole.len() - 1] {
            let e = read_frame(&mut Cursor::new(&whole[..cut])).unwrap_err();
            assert!(matches!(e, RunnerError::Protocol(_)), "cut at {cut}: {e}");
        }
        let mut huge = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        huge.extend([0; 8]);
        assert!(read_frame(&mut Cursor::new(huge))
            .unwrap_err()
            .to_string()
            .contains("bytes"));
        let mut bad = 6u32.to_le_bytes().to_vec();
        bad.extend(9u32.to_le_bytes());
        bad.extend([0, 0]);
        assert!(read_frame(&mut Cursor::new(bad))
            .unwrap_err()
            .to_string()
            .contains("header of 9"));
    }

    #[test]
    fn requests_say_what_the_runner_reads() {
        let f = parse(&load(
            3,
            &UserModel::Runner {
                function: "m:f".into(),
                pythonpath: Some("/p".into()),
            },
            2,
        ));
        let v: serde_json::Value = serde_json::from_slice(&f.header).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"op":"load","job":3,"runner":"m:f","pythonpath":"/p","threads":2})
        );
        let f = parse(&load(4, &UserModel::Torch("/m.pt".into()), 1));
        let v: serde_json::Value = serde_json::from_slice(&f.header).unwrap();
        assert_eq!(v, serde_json::json!({"op":"load","job":4,"torch":"/m.pt","threads":1}));
        let f = parse(&warm(4, &UserModel::Torch("/m.pt".into()), 1));
        let v: serde_json::Value = serde_json::from_slice(&f.header).unwrap();
        assert_eq!(v, serde_json::json!({"op":"warm","job":4,"torch":"/m.pt","threads":1}));
        let json = |frame: Vec<u8>| -> serde_json::Value { serde_json::from_slice(&parse(&frame).header).unwrap() };
        assert_eq!(json(drop_model(4)), serde_json::json!({"op":"drop","job":4}));
        assert_eq!(json(status()), serde_json::json!({"op":"status"}));
        assert_eq!(
            json(preload(&["torch".into(), "a.b".into()])),
            serde_json::json!({"op":"preload","modules":["torch","a.b"]})
        );
        let f = parse(&forward(7, &[1.0, -2.5], 1, 2));
        assert_eq!(f.tail, [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat());
        let v: serde_json::Value = serde_json::from_slice(&f.header).unwrap();
        assert_eq!(v, serde_json::json!({"op":"forward","job":7,"rows":1,"cols":2}));
        let f = parse(&call(7, &Inputs::Bytes(vec![b"ab".to_vec(), vec![], b"c".to_vec()])));
        let v: serde_json::Value = serde_json::from_slice(&f.header).unwrap();
        assert_eq!(
            (v["lens"].clone(), v["job"].as_u64()),
            (serde_json::json!([2, 0, 1]), Some(7))
        );
        assert_eq!(f.tail, b"abc");
        let f = parse(&call(7, &Inputs::Paths(vec!["/d/a".into()])));
        let v: serde_json::Value = serde_json::from_slice(&f.header).unwrap();
        assert_eq!(
            (v["inputs"].as_str(), v["paths"][0].as_str()),
            (Some("paths"), Some("/d/a"))
        );
    }

    #[test]
    fn a_status_reply_lists_the_models_and_memory() {
        let f = Frame {
            header: br#"{"ok":true,"rss":1000,"models":[{"job":2,"state":"ready","error":null,"bytes":40,
                "rss_growth":-5,"load_s":1.5,"cpu_s":1.25,"ready_ago_ms":300},{"job":3,"state":"failed",
                "error":"ImportError: x","bytes":0,"rss_growth":0,"load_s":0.1,"cpu_s":0.1}]}"#
                .to_vec(),
            tail: vec![],
        };
        let (m, rss) = models(&f).unwrap();
        assert_eq!(rss, 1000);
        assert_eq!(
            (m[0].job, m[0].state, m[0].bytes, m[0].rss_growth, m[0].ready_ago_ms),
            (2, ModelState::Ready, 40, -5, Some(300))
        );
        assert_eq!(
            (m[1].state, m[1].error.as_deref(), m[1].ready_ago_ms),
            (ModelState::Failed, Some("ImportError: x"), None)
        );
        let bare = Frame {
            header: br#"{"ok":true}"#.to_vec(),
            tail: vec![],
        };
        assert!(matches!(models(&bare), Err(RunnerError::Protocol(_))));
    }

    #[test]
    fn replies_are_checked_against_the_request() {
        let raised = Frame {
            header: br#"{"ok":false,"error":"ValueError: bad\nmore"}"#.to_vec(),
            tail: vec![],
        };
        assert!(matches!(reply(&raised), Err(RunnerError::Raised(e)) if e == "ValueError: bad"));
        let junk = Frame {
            header: b"<html>".to_vec(),
            tail: vec![],
        };
        assert!(matches!(reply(&junk), Err(RunnerError::Protocol(_))));
        let lg = |rows: usize, cols: usize, floats: usize| Frame {
            header: format!(r#"{{"ok":true,"rows":{rows},"cols":{cols}}}"#).into_bytes(),
            tail: vec![0; floats * 4],
        };
        assert_eq!(logits(&lg(2, 3, 6), 2).unwrap().1, 3);
        assert!(matches!(logits(&lg(3, 3, 9), 2), Err(RunnerError::Raised(_))));
        assert!(matches!(logits(&lg(2, 3, 5), 2), Err(RunnerError::Protocol(_))));
        let out = Frame {
            header: br#"{"ok":true,"outputs":[["a","1"],["b"]]}"#.to_vec(),
            tail: vec![],
        };
        assert_eq!(outputs(&out, 2).unwrap()[1], vec!["b"]);
        assert!(outputs(&out, 3)
            .unwrap_err()
            .to_string()
            .contains("2 outputs for 3 inputs"));
    }
}
