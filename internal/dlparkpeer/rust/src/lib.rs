//! dlpark as a DLPack peer for the Go tests: tensors made by dlpark, and a
//! dlpark consumer of Go's tensors. Every function is extern "C".
use std::ffi::c_void;
use std::sync::atomic::{AtomicI64, Ordering};

use dlpark::ffi::{DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::{DlpackElement, ManagedTensorBase, legacy, versioned};

static LIVE: AtomicI64 = AtomicI64::new(0);

/// The owner of a dlpark-made tensor's data; counts live owners.
struct Owner(#[allow(dead_code)] Vec<f32>); // keeps the data alive until the deleter

impl Drop for Owner {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn make<M: ManagedTensorBase>(rows: i64, cols: i64) -> dlpark::Managed<M> {
    let data: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
    let ptr = data.as_ptr() as *mut c_void;
    LIVE.fetch_add(1, Ordering::SeqCst);
    let owner = Box::new(Owner(data));
    let shape = [rows, cols];
    let strides = [cols, 1];
    let mut init = Dynamic::new(shape.as_slice(), strides.as_slice())
        .prepare_as::<M>()
        .expect("metadata")
        .initialize(owner);
    init.set_data(ptr);
    init.set_dtype(f32::DTYPE);
    init.set_device(DLDevice::CPU);
    unsafe { init.finish() }
}

/// A rows x cols float32 tensor 0, 1, 2, ... made by dlpark (versioned).
#[unsafe(no_mangle)]
pub extern "C" fn dlpark_make_versioned(rows: i64, cols: i64) -> *mut DLManagedTensorVersioned {
    let t: versioned::Dlpack = make(rows, cols);
    t.into_raw()
}

/// The same as a legacy DLManagedTensor.
#[unsafe(no_mangle)]
pub extern "C" fn dlpark_make_legacy(rows: i64, cols: i64) -> *mut DLManagedTensor {
    let t: legacy::Dlpack = make(rows, cols);
    t.into_raw()
}

/// dlpark owners not yet dropped (by a consumer's call to the deleter).
#[unsafe(no_mangle)]
pub extern "C" fn dlpark_live() -> i64 {
    LIVE.load(Ordering::SeqCst)
}

/// Takes ownership of a versioned float32 or float64 tensor with dlpark,
/// validates it, sums its elements honouring strides, and drops it (which
/// calls the producer's deleter). Returns NaN if dlpark rejects it.
#[unsafe(no_mangle)]
pub extern "C" fn dlpark_consume_sum(ptr: *mut DLManagedTensorVersioned) -> f64 {
    let Ok(t) = (unsafe { versioned::Dlpack::from_raw(ptr) }) else {
        return f64::NAN;
    };
    let Ok(view) = t.validate() else {
        return f64::NAN;
    };
    let shape = view.shape().to_vec();
    let Ok(strides) = view.strides_or_compact() else {
        return f64::NAN;
    };
    let dtype = view.dtype();
    let base = unsafe { view.offset_bytes_ptr() };
    let Ok(base) = base else {
        return f64::NAN;
    };
    let size = (dtype.bits / 8) as isize;
    let n = view.num_elements();
    let mut idx = vec![0i64; shape.len()];
    let mut sum = 0.0;
    for _ in 0..n {
        let off: i64 = idx.iter().zip(strides.iter()).map(|(i, s)| i * s).sum();
        let p = unsafe { base.offset(off as isize * size) };
        sum += match dtype.bits {
            32 => unsafe { *(p as *const f32) as f64 },
            _ => unsafe { *(p as *const f64) },
        };
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    sum // t drops here: the deleter runs once
}

/// The owner of bytes for dlpark_make_bytes (8-byte aligned storage).
struct Words(#[allow(dead_code)] Vec<u64>); // keeps the data alive until the deleter

impl Drop for Words {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A 1-d tensor of n elements of DLPack type (code, bits), made by dlpark
/// over a copy of the bytes at data.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlpark_make_bytes(code: u8, bits: u8, n: i64, data: *const u8) -> *mut DLManagedTensorVersioned {
    let nbytes = n as usize * (bits as usize / 8);
    let mut words = vec![0u64; nbytes.div_ceil(8)];
    unsafe { std::ptr::copy_nonoverlapping(data, words.as_mut_ptr() as *mut u8, nbytes) };
    let ptr = words.as_mut_ptr() as *mut c_void;
    LIVE.fetch_add(1, Ordering::SeqCst);
    let shape = [n];
    let strides = [1i64];
    let mut init = Dynamic::new(shape.as_slice(), strides.as_slice())
        .prepare_as::<DLManagedTensorVersioned>()
        .expect("metadata")
        .initialize(Box::new(Words(words)));
    init.set_data(ptr);
    init.set_dtype(dlpark::ffi::DLDataType { code: dlpark::ffi::DLDataTypeCode(code), bits, lanes: 1 });
    init.set_device(DLDevice::CPU);
    let t: versioned::Dlpack = unsafe { init.finish() };
    t.into_raw()
}

/// Takes ownership of a versioned compact tensor with dlpark, copies its
/// bytes (dlpark's cpu_bytes) into out, drops it; returns the bytes copied
/// or -1 if dlpark rejects it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlpark_copy_bytes(ptr: *mut DLManagedTensorVersioned, out: *mut u8, cap: usize) -> i64 {
    let Ok(t) = (unsafe { versioned::Dlpack::from_raw(ptr) }) else {
        return -1;
    };
    let Ok(view) = t.validate() else {
        return -1;
    };
    let Ok(bytes) = (unsafe { view.cpu_bytes() }) else {
        return -1;
    };
    if bytes.len() > cap {
        return -1;
    }
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len()) };
    bytes.len() as i64
}
