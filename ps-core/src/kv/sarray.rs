//! `SArray<T>`: a shared, immutable array of plain-old-data values backed by
//! `bytes::Bytes`, so it travels to and from the wire without copies (ps-lite's SArray).

use super::error::KvError;
use bytemuck::Pod;
use bytes::Bytes;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

/// A cheaply clonable, immutable `[T]` backed by `Bytes`. Always aligned for `T`.
#[derive(Clone)]
pub struct SArray<T: Pod> {
    bytes: Bytes,
    _t: PhantomData<T>,
}

struct VecOwner<T: Pod>(Vec<T>);

impl<T: Pod> AsRef<[u8]> for VecOwner<T> {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

impl<T: Pod + Send + Sync> SArray<T> {
    /// Takes ownership of `v` without copying it.
    pub fn from_vec(v: Vec<T>) -> SArray<T> {
        SArray {
            bytes: Bytes::from_owner(VecOwner(v)),
            _t: PhantomData,
        }
    }

    /// Views `bytes` as `[T]`: without copying when they are aligned for `T`, with one
    /// copy otherwise. [`KvError::Misaligned`] if the length is not a multiple of
    /// `size_of::<T>()`.
    pub fn from_bytes(bytes: Bytes) -> Result<SArray<T>, KvError> {
        let size = std::mem::size_of::<T>();
        if size == 0 || !bytes.len().is_multiple_of(size) {
            return Err(KvError::Misaligned { len: bytes.len(), size });
        }
        if (bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) || bytes.is_empty() {
            return Ok(SArray { bytes, _t: PhantomData });
        }
        let mut v = vec![T::zeroed(); bytes.len() / size];
        bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(&bytes);
        Ok(SArray::from_vec(v))
    }

    /// Copies `s`.
    pub fn copy_from(s: &[T]) -> SArray<T> {
        SArray::from_vec(s.to_vec())
    }

    /// An empty array.
    pub fn empty() -> SArray<T> {
        SArray {
            bytes: Bytes::new(),
            _t: PhantomData,
        }
    }

    /// The underlying bytes (shared, not copied).
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Elements `start..end`, sharing the storage.
    pub fn slice(&self, start: usize, end: usize) -> SArray<T> {
        let size = std::mem::size_of::<T>();
        SArray {
            bytes: self.bytes.slice(start * size..end * size),
            _t: PhantomData,
        }
    }
}

impl<T: Pod> Deref for SArray<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.bytes.is_empty() {
            return &[];
        }
        // Alignment and length were checked when the array was made.
        bytemuck::cast_slice(&self.bytes)
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for SArray<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Pod + PartialEq> PartialEq for SArray<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Pod + Send + Sync> From<Vec<T>> for SArray<T> {
    fn from(v: Vec<T>) -> Self {
        SArray::from_vec(v)
    }
}

impl<T: Pod + Send + Sync> Default for SArray<T> {
    fn default() -> Self {
        SArray::empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_slices_without_copies() {
        let a = SArray::from_vec(vec![1.0f32, 2.0, 3.0, 4.0]);
        let b = a.clone();
        assert_eq!(a.bytes().as_ptr(), b.bytes().as_ptr());
        let s = a.slice(1, 3);
        assert_eq!(&s[..], &[2.0, 3.0]);
        assert_eq!(s.bytes().as_ptr() as usize, a.bytes().as_ptr() as usize + 4);
    }

    #[test]
    fn unaligned_bytes_are_copied_once_and_bad_lengths_rejected() {
        let raw: Vec<u8> = (0u8..17).collect();
        let bytes = Bytes::from(raw).slice(1..17);
        let a = SArray::<u32>::from_bytes(bytes.clone()).unwrap();
        assert_eq!(a[0], u32::from_le_bytes([1, 2, 3, 4]));
        assert_eq!(a.len(), 4);
        assert_eq!(
            SArray::<u64>::from_bytes(bytes.slice(0..5)).err(),
            Some(KvError::Misaligned { len: 5, size: 8 })
        );
        assert!(SArray::<u64>::from_bytes(Bytes::new()).unwrap().is_empty());
    }
}
