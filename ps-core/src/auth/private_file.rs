//! Files that hold a secret (the cluster secret, a TLS private key, a CA's key): read
//! only when their owner alone may read or write them, as ssh refuses a private key
//! that group or others can read. A file open to others is refused with one line that
//! says how to fix it; the rule ([`check_mode`]) is pure, the read checks the file it
//! opened (so a file swapped in between cannot slip through).

use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;

/// The permission bits a private file may not have: any for group or others.
pub const OPEN_BITS: u32 = 0o077;

/// Checks a private file's mode: Err(the permission bits) when group or others have any
/// access.
pub fn check_mode(mode: u32) -> Result<(), u32> {
    if mode & OPEN_BITS == 0 {
        Ok(())
    } else {
        Err(mode & 0o7777)
    }
}

/// Reads the private file at `path`. A file that group or others may access is an
/// error of kind [`io::ErrorKind::PermissionDenied`] whose text says the mode and the
/// `chmod` that fixes it.
pub fn read(path: &str) -> io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let mode = f.metadata()?.mode();
    check_mode(mode).map_err(|m| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("it may be read by group or others (mode {m:04o}); run chmod 600 '{path}' (a secret must be its owner's alone)"),
        )
    })?;
    let mut out = Vec::new();
    f.read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_the_owners_file_is_read() {
        for ok in [0o600, 0o400, 0o700, 0o100600] {
            assert_eq!(check_mode(ok), Ok(()), "{ok:o}");
        }
        for open in [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o666] {
            assert!(check_mode(open).is_err(), "{open:o}");
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("secret");
        std::fs::write(&p, b"s3cret").unwrap();
        let path = p.display().to_string();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read(&path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let line = e.to_string();
        assert!(
            line.contains("mode 0644") && line.contains("chmod 600") && !line.contains("s3cret"),
            "{line}"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&path).unwrap(), b"s3cret");
        assert_eq!(
            read(&d.path().join("none").display().to_string()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
