"""The package's surface without a cluster: every public function, class and method
has a docstring and a stub in psrs/_psrs.pyi; bad input to calls that need no cluster
is refused with a clear error."""

import inspect
import re
from pathlib import Path

import numpy as np
import psrs
import pytest
from psrs import _psrs

STUB = (Path(psrs.__file__).parent / "_psrs.pyi").read_text()


def public(obj):
    return [n for n in dir(obj) if not n.startswith("_")]


def test_every_public_callable_has_a_docstring_and_a_stub():
    missing_doc, missing_stub = [], []
    for name in public(_psrs):
        obj = getattr(_psrs, name)
        if not callable(obj):
            assert re.search(rf"^{name}: int$", STUB, re.M), f"constant {name} not in the stub"
            continue
        kind = "class" if inspect.isclass(obj) else "def"
        if not re.search(rf"^{kind} {name}\b", STUB, re.M):
            missing_stub.append(name)
        if not (obj.__doc__ or "").strip():
            missing_doc.append(name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for m in vars(obj):
                if m.startswith("_"):
                    continue
                if not (getattr(obj, m).__doc__ or "").strip():
                    missing_doc.append(f"{name}.{m}")
                if not re.search(rf"^    (def {m}\b|{m}: )", STUB, re.M):
                    missing_stub.append(f"{name}.{m}")
    assert not missing_doc, f"no docstring: {missing_doc}"
    assert not missing_stub, f"not in _psrs.pyi: {missing_stub}"
    assert "tasks" in psrs.__all__ and (psrs.tasks.__doc__ or "").strip()


def test_read_records_refuses_missing_and_corrupt_files(tmp_path):
    with pytest.raises(psrs.Error, match="nope.rio"):
        psrs.read_records(tmp_path / "nope.rio")
    bad = tmp_path / "bad.rio"
    bad.write_bytes(b"not a recordio file at all" * 10)
    with pytest.raises(psrs.Error, match="bad.rio"):
        psrs.read_records(bad)


def test_calls_before_start_raise_psrs_error():
    with pytest.raises(psrs.Error):
        psrs.KVWorker(0, np.float32)
