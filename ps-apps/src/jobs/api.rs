//! The HTTP/JSON API on the scheduler's stats port, as a plain function of (method,
//! path, body) so it is tested without sockets:
//!
//! - `POST /jobs` with a job's JSON → 201 and the job object;
//! - `GET /jobs` → the array of jobs; `GET /jobs/ID` → one job;
//! - `DELETE /jobs/ID` → cancels it, 200 and the job object;
//! - `GET /workers` → each worker's job and task;
//! - `GET /history` → the cluster over time (the dashboard's charts);
//! - `GET /` → the jobs dashboard; `/assets/uPlot.js`, `/assets/uPlot.css` its
//!   charting library (uPlot, MIT), embedded in the binary.
//!
//! Bad requests get a 4xx whose body is `{"error": "one-line reason"}`: 400 bad JSON
//! or options, 403 a job that runs code on a cluster that runs none (`--no-code-jobs`),
//! 404 unknown job, 405 wrong method, 409 a job already ended; 500 when the scheduler
//! could not save. The status follows the error's kind ([`JobsError`]).

use super::error::JobsError;

use super::scheduler::JobScheduler;
use super::table::parse_id;
use crate::stats::ApiResponse;

const JSON: &str = "application/json";

fn error(code: u16, why: &str) -> ApiResponse {
    let one_line = why.lines().next().unwrap_or("");
    (code, JSON, format!("{}\n", serde_json::json!({ "error": one_line })))
}

fn failed(e: &JobsError) -> ApiResponse {
    error(e.http_status(), &e.to_string())
}

fn json<T: serde::Serialize>(code: u16, v: &T) -> ApiResponse {
    (
        code,
        JSON,
        format!("{}\n", serde_json::to_string(v).expect("views serialize")),
    )
}

/// The fields of a job that make a worker run code the submitter chose: a Python
/// function and the directory it is imported from, a TorchScript file.
pub const CODE_FIELDS: [&str; 3] = ["runner", "pythonpath", "torch"];

/// Refuses a job whose JSON gives any of [`CODE_FIELDS`] ([`JobsError::Forbidden`]);
/// other JSON passes (a malformed job is the scheduler's to refuse).
pub fn refuse_code(body: &str) -> Result<(), JobsError> {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    match CODE_FIELDS.iter().find(|k| v.get(**k).is_some_and(|x| !x.is_null())) {
        Some(k) => Err(JobsError::Forbidden(format!(
            "this cluster runs no code of its users (psrs cluster --no-code-jobs): {k:?} refused"
        ))),
        None => Ok(()),
    }
}

/// [`route`] on a cluster that may refuse jobs running the submitter's code:
/// `code_jobs` false refuses them with 403 ([`refuse_code`]) before anything else.
pub fn route_jobs(
    s: &mut JobScheduler,
    method: &str,
    path: &str,
    body: &str,
    now_ms: u64,
    code_jobs: bool,
) -> Option<ApiResponse> {
    if !code_jobs && method == "POST" && path.trim_end_matches('/') == "/jobs" {
        if let Err(e) = refuse_code(body) {
            return Some(failed(&e));
        }
    }
    route(s, method, path, body, now_ms)
}

/// Answers an API request at `now_ms`, or None if `path` is not the API's (the stats
/// routes then answer it).
pub fn route(s: &mut JobScheduler, method: &str, path: &str, body: &str, now_ms: u64) -> Option<ApiResponse> {
    let path = path.trim_end_matches('/');
    Some(match (method, path) {
        ("GET", "" | "/jobs.html") => (200, "text/html; charset=utf-8", super::page::PAGE.to_string()),
        ("GET", "/jobs") => json(200, &s.views(now_ms)),
        ("POST", "/jobs") => match s.submit(body, now_ms) {
            Ok(v) => json(201, &v),
            Err(e) => failed(&e),
        },
        (_, "/jobs") => error(405, "use GET or POST on /jobs"),
        ("GET", "/workers") => json(200, &s.worker_views()),
        ("GET", "/history") => json(200, &s.chart()),
        ("GET", "/assets/uPlot.js") => (200, "text/javascript; charset=utf-8", super::page::UPLOT_JS.to_string()),
        ("GET", "/assets/uPlot.css") => (200, "text/css; charset=utf-8", super::page::UPLOT_CSS.to_string()),
        (m, p) if p.starts_with("/jobs/") => {
            let id = &p["/jobs/".len()..];
            let Some(num) = parse_id(id).filter(|&n| s.table().get(n).is_some()) else {
                return Some(failed(&JobsError::NoSuchJob(id.to_string())));
            };
            match m {
                "GET" => json(200, &s.view(num, now_ms).expect("exists")),
                "DELETE" => match s.cancel(num, now_ms) {
                    Ok(v) => json(200, &v),
                    Err(e) => failed(&e),
                },
                _ => error(405, "use GET or DELETE on /jobs/ID"),
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_that_run_the_submitters_code_are_named_and_refused() {
        for (body, field) in [
            (r#"{"kind":"infer","runner":"m:f","data":"d","out":"o"}"#, "runner"),
            (r#"{"kind":"infer","pythonpath":"/x","model":"m"}"#, "pythonpath"),
            (r#"{"kind":"infer","torch":"m.pt","data":"d","out":"o"}"#, "torch"),
        ] {
            let e = refuse_code(body).unwrap_err();
            assert_eq!(e.http_status(), 403);
            let text = e.to_string();
            assert!(
                text.contains("--no-code-jobs") && text.contains(field) && !text.contains('\n'),
                "{text}"
            );
        }
        for ok in [
            r#"{"kind":"infer","model":"m.model","data":"d","out":"o","torch":null}"#,
            r#"{"kind":"train","train":["a.rio"]}"#,
            "not json",
        ] {
            assert!(refuse_code(ok).is_ok(), "{ok}");
        }
    }
}
