//! A stand-in HTTP server for tests (a file server, a jobs API answering a fixed
//! list): hyper's HTTP/1.1 on a one-thread tokio runtime of its own, each request
//! answered by a plain function. Stops when dropped.

use bytes::Bytes;
use http_body_util::Full;
use std::net::SocketAddr;
use std::sync::Arc;

/// A request as the handler sees it.
pub struct Req {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The path (without the query).
    pub path: String,
    headers: hyper::HeaderMap,
}

impl Req {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The answer: status, headers and body. A `Content-Length` given here is sent as
/// is (HEAD answers included).
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    /// `status` with `body` and no other header.
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Resp {
        Resp {
            status,
            headers: Vec::new(),
            body: body.into(),
        }
    }
}

/// A running server.
pub struct FakeHttp {
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

type Handler = Arc<dyn Fn(&Req) -> Resp + Send + Sync>;

impl FakeHttp {
    /// Serves every request with `handler` until dropped.
    pub fn start(handler: impl Fn(&Req) -> Resp + Send + Sync + 'static) -> FakeHttp {
        let handler: Handler = Arc::new(handler);
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = std_listener.local_addr().unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                loop {
                    let sock = tokio::select! {
                        _ = &mut stopped => return,
                        r = listener.accept() => match r { Ok((s, _)) => s, Err(_) => continue },
                    };
                    let h = Arc::clone(&handler);
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                            let h = Arc::clone(&h);
                            async move {
                                let r = Req {
                                    method: req.method().as_str().to_string(),
                                    path: req.uri().path().to_string(),
                                    headers: req.headers().clone(),
                                };
                                let a = h(&r);
                                let mut resp = hyper::Response::new(Full::new(Bytes::from(a.body)));
                                *resp.status_mut() = hyper::StatusCode::from_u16(a.status).unwrap();
                                for (k, v) in a.headers {
                                    resp.headers_mut().insert(k, v.parse().unwrap());
                                }
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
                            .await;
                    });
                }
            });
        });
        FakeHttp {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for FakeHttp {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
