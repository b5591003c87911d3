//! One dlpark export/import round trip of a 32x32 float32 tensor per
//! iteration, the equivalent of dlpack's Go -> Go benchmark: the data is
//! shared through an Arc (no data allocation), the managed struct is built,
//! passed as a raw pointer, taken back, validated, viewed as a slice and
//! dropped (which calls the deleter). Prints the median ns/op of 7 runs.
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use dlpark::ffi::{DLDevice, DLManagedTensorVersioned};
use dlpark::metadata::Dynamic;
use dlpark::versioned;
use dlpark::DlpackElement;

fn round_trip(data: &Arc<Vec<f32>>, shape: &[i64; 2], strides: &[i64; 2]) -> f32 {
    let mut init = Dynamic::new(shape.as_slice(), strides.as_slice())
        .prepare_as::<DLManagedTensorVersioned>()
        .unwrap()
        .initialize(Arc::clone(data));
    init.set_data(data.as_ptr() as *mut std::ffi::c_void);
    init.set_dtype(f32::DTYPE);
    init.set_device(DLDevice::CPU);
    let exported: versioned::Dlpack = unsafe { init.finish() };
    let raw = black_box(exported.into_raw());
    let imported = unsafe { versioned::Dlpack::from_raw(raw) }.unwrap();
    let view = imported.validate().unwrap();
    let xs = unsafe { view.cpu_slice::<f32>() }.unwrap();
    xs[0]
}

fn main() {
    let data = Arc::new(vec![1.0f32; 1024]);
    let (shape, strides) = ([32i64, 32], [32i64, 1]);
    let iters: u32 = 2_000_000;
    let mut runs = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let mut acc = 0.0f32;
        for _ in 0..iters {
            acc += round_trip(&data, &shape, &strides);
        }
        black_box(acc);
        runs.push(start.elapsed().as_nanos() as f64 / iters as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(Arc::strong_count(&data), 1, "every deleter ran");
    println!("{:.1}", runs[runs.len() / 2]);
}
