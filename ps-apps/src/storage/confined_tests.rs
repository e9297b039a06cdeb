use super::*;
use std::os::unix::fs::symlink;

struct Tree {
    _t: tempfile::TempDir,
    data: PathBuf,
    outs: PathBuf,
    elsewhere: PathBuf,
}

fn tree() -> Tree {
    let t = tempfile::tempdir().unwrap();
    let (data, outs, elsewhere) = (t.path().join("data"), t.path().join("outs"), t.path().join("elsewhere"));
    for d in [&data, &elsewhere] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(data.join("a.rio"), b"inside").unwrap();
    std::fs::write(elsewhere.join("secret"), b"root:x:0:0").unwrap();
    Tree {
        _t: t,
        data,
        outs,
        elsewhere,
    }
}

fn refused(r: io::Result<impl std::fmt::Debug>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{what}: {e}");
    let line = e.to_string();
    assert!(line.contains("outside --"), "{what}: {line}");
    assert!(!line.contains("root:x"), "never the contents: {line}");
}

#[test]
fn reads_stay_beneath_the_data_and_outputs_directories() {
    let t = tree();
    let r = Roots::new(&t.data, &t.outs).unwrap();
    assert!(t.outs.is_dir(), "--outputs-dir made");
    assert_eq!(r.read(&t.data.join("a.rio")).unwrap(), b"inside");
    std::fs::write(t.outs.join("m.model"), b"model").unwrap();
    assert_eq!(r.read(&t.outs.join("m.model")).unwrap(), b"model");
    // a relative link that stays inside is followed; an absolute one is refused
    // (resolved beneath the directory, it would name another place)
    symlink("a.rio", t.data.join("alias.rio")).unwrap();
    assert_eq!(r.read(&t.data.join("alias.rio")).unwrap(), b"inside");
    symlink(t.data.join("a.rio"), t.data.join("absolute.rio")).unwrap();
    refused(r.read(&t.data.join("absolute.rio")), "an absolute link");
    // out through a link (file or directory), '..', or simply elsewhere
    symlink(t.elsewhere.join("secret"), t.data.join("link.rio")).unwrap();
    refused(r.read(&t.data.join("link.rio")), "a file link out");
    symlink(&t.elsewhere, t.data.join("dir")).unwrap();
    refused(r.read(&t.data.join("dir/secret")), "a directory link out");
    refused(r.read(&t.data.join("../elsewhere/secret")), "'..'");
    refused(r.read(&t.elsewhere.join("secret")), "elsewhere");
    assert!(r.is_dir(&t.data) && !r.is_dir(&t.data.join("dir")) && !r.is_dir(&t.elsewhere));
}

#[test]
fn writes_stay_beneath_the_outputs_directory() {
    let t = tree();
    let r = Roots::new(&t.data, &t.outs).unwrap();
    r.write_atomic(&t.outs.join("sub/m.model"), b"one").unwrap();
    r.write_atomic(&t.outs.join("sub/m.model"), b"two").unwrap();
    assert_eq!(std::fs::read(t.outs.join("sub/m.model")).unwrap(), b"two");
    assert_eq!(
        std::fs::read_dir(t.outs.join("sub")).unwrap().count(),
        1,
        "no temporary left"
    );
    refused(
        r.write_atomic(&t.data.join("m.model"), b"x"),
        "the data directory is read-only",
    );
    // a directory swapped for a link out after the path was checked
    std::fs::remove_dir_all(t.outs.join("sub")).unwrap();
    symlink(&t.elsewhere, t.outs.join("sub")).unwrap();
    refused(
        r.write_atomic(&t.outs.join("sub/m.model"), b"x"),
        "a directory link out",
    );
    refused(r.create(&t.outs.join("sub/p.csv")), "create under a link out");
    // a file swapped for a link out
    symlink(t.elsewhere.join("target.csv"), t.outs.join("p.csv")).unwrap();
    refused(r.create(&t.outs.join("p.csv")), "create through a file link");
    assert!(!t.elsewhere.join("m.model").exists() && !t.elsewhere.join("target.csv").exists());
    assert!(!t.elsewhere.join("p.csv").exists());
    let mut f = r.create(&t.outs.join("deep/er/q.csv")).unwrap();
    f.write_all(b"ok").unwrap();
    r.create_dir_all(&t.outs.join("batches")).unwrap();
    refused(r.create_dir_all(&t.outs.join("sub/x")), "a directory under a link out");
}

#[test]
fn directory_datasets_list_their_files_and_refuse_a_link_out() {
    let t = tree();
    let r = Roots::new(&t.data, &t.outs).unwrap();
    let ds = t.data.join("images");
    std::fs::create_dir(&ds).unwrap();
    for f in ["b.jpg", "a.jpg", ".hidden"] {
        std::fs::write(ds.join(f), f).unwrap();
    }
    std::fs::create_dir(ds.join("sub")).unwrap();
    let names = |v: Vec<PathBuf>| {
        v.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(r.list_files(&ds).unwrap()), ["a.jpg", "b.jpg"]);
    symlink(t.elsewhere.join("secret"), ds.join("c.jpg")).unwrap();
    let e = r.list_files(&ds).unwrap_err();
    assert!(
        e.to_string().contains("c.jpg") && e.to_string().contains("outside --data-dir"),
        "{e}"
    );
    // unconfined: as the file system says
    assert_eq!(
        names(Roots::anywhere().list_files(&ds).unwrap()),
        ["a.jpg", "b.jpg", "c.jpg"]
    );
    assert_eq!(
        Roots::anywhere().read(&t.elsewhere.join("secret")).unwrap(),
        b"root:x:0:0"
    );
}
