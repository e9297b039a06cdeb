//! docs/configuration.md is complete and current:
//! - every `DMLC_*` / `PS_*` variable the code reads (a string literal naming it in
//!   ps-core, ps-apps, src, python/src or python/psrs) is listed in the first column of
//!   one of its tables;
//! - every `DMLC_*` / `PS_*` name the page mentions is one the code reads (no stale
//!   entries);
//! - every top-level `psrs` command has a section (a heading naming `psrs COMMAND`), and
//!   every option `psrs ... --help` prints appears in its command's section.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const PAGE: &str = include_str!("../docs/configuration.md");
const PREFIXES: [&str; 2] = ["DMLC_", "PS_"];
const SOURCE_DIRS: [&str; 5] = ["ps-core", "ps-apps", "src", "python/src", "python/psrs"];
const SOURCE_EXTS: [&str; 3] = ["rs", "py", "pyi"];

fn is_name_char(c: char) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
}

/// The `DMLC_*` / `PS_*` names that stand alone in a string literal (`"PS_SHM"` or
/// `'PS_SHM'`): the names the code looks up.
fn quoted_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for quote in ['"', '\''] {
        for (i, _) in text.match_indices(quote) {
            let rest = &text[i + 1..];
            if !PREFIXES.iter().any(|p| rest.starts_with(p)) {
                continue;
            }
            let name: String = rest.chars().take_while(|c| is_name_char(*c)).collect();
            let complete = rest[name.len()..].starts_with(quote);
            if complete && PREFIXES.iter().all(|p| name.len() > p.len()) {
                out.insert(name);
            }
        }
    }
    out
}

/// Every `DMLC_*` / `PS_*` word in `text`, wherever it stands.
fn words(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut prev = ' ';
    for (i, c) in text.char_indices() {
        if !is_name_char(prev) && !prev.is_ascii_alphanumeric() {
            let rest = &text[i..];
            if let Some(p) = PREFIXES.iter().find(|p| rest.starts_with(**p)) {
                let name: String = rest.chars().take_while(|c| is_name_char(*c)).collect();
                if name.len() > p.len() && !rest[name.len()..].starts_with(|c: char| c.is_ascii_lowercase()) {
                    out.insert(name.trim_end_matches('_').to_string());
                }
            }
        }
        prev = c;
    }
    out
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target" && n != "__pycache__") {
                source_files(&p, out);
            }
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| SOURCE_EXTS.contains(&x))
        {
            out.push(p);
        }
    }
}

/// Name → the first file reading it.
fn names_the_code_reads() -> BTreeMap<String, PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in SOURCE_DIRS {
        source_files(&root.join(d), &mut files);
    }
    files.sort();
    assert!(
        files.len() > 50,
        "found only {} source files under {SOURCE_DIRS:?}",
        files.len()
    );
    let mut out = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for n in quoted_names(&text) {
            out.entry(n)
                .or_insert_with(|| f.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    out
}

/// The names in the first column of the page's tables.
fn names_listed(page: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in page.lines().filter(|l| l.starts_with('|')) {
        let first = line.split('|').nth(1).unwrap_or("");
        for piece in first.split('`').skip(1).step_by(2) {
            out.extend(words(piece).into_iter().filter(|w| w == piece.trim()));
        }
    }
    out
}

#[test]
fn every_variable_the_code_reads_is_listed() {
    let read = names_the_code_reads();
    assert!(
        read.len() >= 30,
        "the scan found only {} variables: {read:?}",
        read.len()
    );
    let listed = names_listed(PAGE);
    let missing: Vec<String> = read
        .iter()
        .filter(|(n, _)| !listed.contains(*n))
        .map(|(n, f)| format!("{n} (read in {})", f.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not list these variables in a table's first column: {}",
        missing.join(", ")
    );
}

#[test]
fn every_variable_the_page_names_is_read_by_the_code() {
    let read = names_the_code_reads();
    let stale: Vec<String> = words(PAGE).into_iter().filter(|n| !read.contains_key(n)).collect();
    assert!(
        stale.is_empty(),
        "docs/configuration.md names variables no code reads: {}",
        stale.join(", ")
    );
}

fn help(path: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_psrs"))
        .args(path)
        .arg("--help")
        .env_remove("PSRS_API")
        .output()
        .expect("run psrs --help");
    assert!(out.status.success(), "psrs {} --help failed", path.join(" "));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a `--help` text lists (clap's `Commands:` section), without `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The long options a `--help` text lists, without `--help` and `--version`.
fn options(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in help.lines() {
        let t = l.trim_start();
        let t = match t.strip_prefix('-') {
            Some(s) if s.len() > 2 && s.as_bytes()[1] == b',' => s[2..].trim_start(),
            _ => t,
        };
        if let Some(rest) = t.strip_prefix("--") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if !name.is_empty() && name != "help" && name != "version" {
                out.push(format!("--{name}"));
            }
        }
    }
    out
}

/// The text of the section whose heading names `` `psrs PATH` ``, up to the next
/// heading of the same or a higher level.
fn section<'a>(page: &'a str, path: &[String]) -> Option<&'a str> {
    let needle = format!("`psrs {}`", path.join(" "));
    let lines: Vec<&str> = page.lines().collect();
    let start = lines.iter().position(|l| l.starts_with('#') && l.contains(&needle))?;
    let level = lines[start].chars().take_while(|c| *c == '#').count();
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with('#') && l.chars().take_while(|c| *c == '#').count() <= level)
        .map_or(lines.len(), |i| start + 1 + i);
    let from = lines[..start].iter().map(|l| l.len() + 1).sum::<usize>();
    let to = lines[..end].iter().map(|l| l.len() + 1).sum::<usize>().min(page.len());
    Some(&page[from..to])
}

#[test]
fn every_command_line_option_is_listed_under_its_command() {
    let mut problems = Vec::new();
    let mut todo: Vec<Vec<String>> = subcommands(&help(&[])).into_iter().map(|c| vec![c]).collect();
    assert!(todo.len() >= 8, "psrs --help lists only {todo:?}");
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        seen += 1;
        let text = help(&path);
        for sub in subcommands(&text) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        let opts = options(&text);
        if path.len() > 1 && opts.is_empty() {
            continue;
        }
        let Some(sec) = section(PAGE, &path) else {
            problems.push(format!("no section headed `psrs {}`", path.join(" ")));
            continue;
        };
        for o in opts {
            if !sec.contains(&format!("`{o}`")) && !sec.contains(&format!("`{o} ")) {
                problems.push(format!("`psrs {}`: {o} is not in its section", path.join(" ")));
            }
        }
    }
    assert!(seen > 10, "walked only {seen} commands");
    assert!(
        problems.is_empty(),
        "docs/configuration.md is missing command-line options:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_scanners_find_what_they_should() {
    let src = r#"let a = v.get("PS_SHM"); let b = "PS_SHM_MB is wrong"; os.environ['DMLC_ROLE']; "PS_""#;
    let q = quoted_names(src);
    assert_eq!(q.into_iter().collect::<Vec<_>>(), ["DMLC_ROLE", "PS_SHM"]);
    let w = words("`PS_SHM` and PS_SHM_MB, not PSRS_API nor GPS_X nor PS_ alone");
    assert_eq!(w.into_iter().collect::<Vec<_>>(), ["PS_SHM", "PS_SHM_MB"]);
    let page = "| `PS_A`, `PS_B` | x | PS_C |\n| `DMLC_ROLE` | y |\n";
    assert_eq!(
        names_listed(page).into_iter().collect::<Vec<_>>(),
        ["DMLC_ROLE", "PS_A", "PS_B"]
    );
    let h = "Options:\n      --rounds <ROUNDS>  x\n  -h, --help  y\n  -v, --verbose\n";
    assert_eq!(options(h), ["--rounds", "--verbose"]);
}
