"""Datasets by URL from Python: psrs.read_records over HTTP (range requests, the same
reader as `psrs train --train http://...`) gives what the local file gives; a missing
object is one clear error."""

import subprocess
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import psrs
import pytest

from cluster import psrs_bin

DATA = Path("/usr/share/datasets/fashion-mnist")


class RangeHandler(SimpleHTTPRequestHandler):
    """Serves files with `Range: bytes=A-B` answered by 206 and the slice."""

    ranges = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        spec = self.headers.get("Range", "")
        path = Path(self.translate_path(self.path))
        if not spec.startswith("bytes=") or not path.is_file():
            return super().do_GET()
        data = path.read_bytes()
        a, _, b = spec[6:].partition("-")
        a, b = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
        RangeHandler.ranges.append((a, b + 1))
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
        self.send_header("Content-Length", str(b + 1 - a))
        self.end_headers()
        self.wfile.write(data[a:b + 1])


@pytest.fixture
def server(tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(tmp_path)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_read_records_by_http_url_matches_the_local_file(tmp_path, server):
    if not (DATA / "t10k-images-idx3-ubyte.gz").exists():
        pytest.fail(f"{DATA} is absent: apt-get install dataset-fashion-mnist (scripts/install-deps.sh does)")
    out = tmp_path / "t10k.rio"
    subprocess.run(
        [psrs_bin(), "convert", "--format", "idx", "--per-chunk", "2000",
         "--input", str(DATA / "t10k-images-idx3-ubyte.gz"),
         "--labels", str(DATA / "t10k-labels-idx1-ubyte.gz"), "--out", str(out)],
        check=True, capture_output=True,
    )
    RangeHandler.ranges.clear()
    remote = psrs.read_records(f"{server}/t10k.rio")
    local = psrs.read_records(out)
    assert len(remote) == len(local) == 2
    for r, l in zip(remote, local):
        assert np.array_equal(np.asarray(r), np.asarray(l))
    # read by ranges (chunk headers, then each chunk), never the whole file at once
    assert RangeHandler.ranges and all(b - a < out.stat().st_size for a, b in RangeHandler.ranges)

    with pytest.raises(psrs.Error, match="absent.rio: not found"):
        psrs.read_records(f"{server}/absent.rio")
