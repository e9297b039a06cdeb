//! numpy arrays to and from the KV layer's `SArray`s. An outgoing C-contiguous array of
//! the right dtype is not copied: its memory backs the message frame, and the frame
//! keeps a reference to the array until the transport is done with it. Anything else
//! (a list, another dtype, a strided view) is converted once with
//! `numpy.ascontiguousarray`. Incoming values are copied once into a new array (or
//! into the caller's `out`).

use bytes::Bytes;
use numpy::{Element, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use ps_core::kv::SArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::ops::{AddAssign, Mul, SubAssign};
use std::sync::atomic::{AtomicU64, Ordering};

/// Inputs converted (copied) on their way out since the process started.
static CONVERSIONS: AtomicU64 = AtomicU64::new(0);

/// How many inputs were converted (copied) because they were not C-contiguous arrays
/// or tensors of the needed type: 0 more after a push shows it went without a copy.
#[pyfunction]
pub fn _conversions() -> u64 {
    CONVERSIONS.load(Ordering::Relaxed)
}

/// A value type a KV worker or server can carry.
pub trait Elem: Element + bytemuck::Pod + Send + Sync + AddAssign + SubAssign + Mul<Output = Self> + 'static {
    /// numpy's name of the type.
    const NAME: &'static str;
    /// `x` converted (for a learning rate).
    fn from_f64(x: f64) -> Self;
}

impl Elem for f32 {
    const NAME: &'static str = "float32";
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
}

impl Elem for f64 {
    const NAME: &'static str = "float64";
    fn from_f64(x: f64) -> f64 {
        x
    }
}

/// The value types by numpy name: "float32" or "float64".
pub fn dtype_name(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<String> {
    let np = py.import("numpy")?;
    let name: String = np.call_method1("dtype", (dtype,))?.getattr("name")?.extract()?;
    match name.as_str() {
        "float32" | "float64" => Ok(name),
        other => Err(PyValueError::new_err(format!(
            "dtype {other}: psrs carries float32 or float64 values"
        ))),
    }
}

/// A CPU torch tensor as a numpy array sharing its memory (`Tensor.numpy()`, after
/// `detach()`); None if `obj` is not a torch tensor.
pub fn torch_as_numpy<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    let ty = obj.get_type();
    let module: String = ty.module()?.extract()?;
    if !(module == "torch" || module.starts_with("torch.")) || !obj.hasattr("numpy")? {
        return Ok(None);
    }
    let device: String = obj.getattr("device")?.getattr("type")?.extract()?;
    if device != "cpu" {
        return Err(PyValueError::new_err(format!(
            "{what}: a tensor on {device}; psrs sends CPU tensors (call .cpu())"
        )));
    }
    let t = obj.call_method0("detach")?;
    match t.call_method0("numpy") {
        Ok(a) => Ok(Some(a)),
        Err(e) => Err(PyValueError::new_err(format!("{what}: {e}"))),
    }
}

/// `obj` as a C-contiguous array of `T`: itself when it is one (a contiguous CPU torch
/// tensor of that type: its memory), else one converted copy.
pub fn contiguous<'py, T: Element>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    let tensor = torch_as_numpy(obj, what)?;
    let obj = tensor.as_ref().unwrap_or(obj);
    if let Ok(a) = obj.cast::<PyArrayDyn<T>>() {
        if a.is_c_contiguous() {
            return Ok(a.clone());
        }
    }
    let py = obj.py();
    CONVERSIONS.fetch_add(1, Ordering::Relaxed);
    let conv = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (obj, numpy::dtype::<T>(py)))
        .map_err(|e| PyValueError::new_err(format!("{what}: not convertible to an array: {e}")))?;
    conv.cast_into::<PyArrayDyn<T>>()
        .map_err(|_| PyValueError::new_err(format!("{what}: not convertible to an array")))
}

/// Keeps a numpy array alive while its memory backs a `Bytes`.
struct Borrowed {
    _array: Py<PyAny>,
    ptr: usize,
    len: usize,
}

impl AsRef<[u8]> for Borrowed {
    fn as_ref(&self) -> &[u8] {
        // The array is C-contiguous, `len` bytes long, and cannot be freed or resized
        // while this reference to it exists (numpy refuses to resize a referenced
        // array).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

/// `obj`'s values as an `SArray`, sharing a contiguous array's memory (the caller must
/// not change the array until the request completes).
pub fn sarray<T: Elem + bytemuck::Pod>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<SArray<T>> {
    let a = contiguous::<T>(obj, what)?;
    let n = a.len();
    if n == 0 {
        return Ok(SArray::empty());
    }
    let owner = Borrowed {
        ptr: a.data() as usize,
        len: n * std::mem::size_of::<T>(),
        _array: a.into_any().unbind(),
    };
    SArray::from_bytes(Bytes::from_owner(owner)).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Keys: `obj` as a contiguous uint64 array, shared like [`sarray`].
pub fn keys(obj: &Bound<'_, PyAny>) -> PyResult<SArray<u64>> {
    let a = contiguous::<u64>(obj, "keys")?;
    if a.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "keys: a 1-d array is needed, got {} dimensions",
            a.ndim()
        )));
    }
    let n = a.len();
    if n == 0 {
        return Ok(SArray::empty());
    }
    let owner = Borrowed {
        ptr: a.data() as usize,
        len: n * 8,
        _array: a.into_any().unbind(),
    };
    SArray::from_bytes(Bytes::from_owner(owner)).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Lengths: `obj` (int32-convertible) copied into an `SArray` (they are small).
pub fn lens(obj: Option<&Bound<'_, PyAny>>) -> PyResult<SArray<i32>> {
    match obj {
        None => Ok(SArray::empty()),
        Some(o) if o.is_none() => Ok(SArray::empty()),
        Some(o) => {
            let a = contiguous::<i32>(o, "lens")?;
            let ro = a.readonly();
            Ok(SArray::copy_from(
                ro.as_slice().map_err(|e| PyValueError::new_err(e.to_string()))?,
            ))
        }
    }
}
