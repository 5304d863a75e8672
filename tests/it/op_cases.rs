//! Each op family of TensorFlow's XLA op set against TensorFlow's own
//! numbers, on the simulator and on PJRT, with the IR's gradients
//! (`tests/tf/ops_<family>.py`; the harness is `support::op_cases`).

use crate::support::op_cases::check_family;

/// The harness's own check, on ops every backend already had.
#[test]
fn basic() {
    check_family("basic");
}

/// Quantization-aware training: FakeQuant* and QuantizeAndDequantizeV2/V3/V4.
#[test]
fn quant() {
    check_family("quant");
/// Bitwise ops, shifts, population counts and integer truncating divisions.
fn bitwise() {
    check_family("bitwise");
}

/// Special functions, elementwise math and the gradients of elementwise ops.
fn special() {
    check_family("special");
/// Image ops, and the second-order gradients of convolutions and pools (`tests/tf/ops_image.py`).
fn image() {
    check_family("image");

/// Spatial data movement and data-format ops (`tests/tf/ops_spatial.py`).
fn spatial() {
    check_family("spatial");
/// Grouped `Conv2D` and its backprops; the 2-D backprops' own gradients.
fn grouped_conv() {
    check_family("grouped_conv");
}
