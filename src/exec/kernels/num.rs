//! The numeric element traits the kernels are generic over: [`Num`] (f32,
//! f64, i32, i64; wrapping integer arithmetic) and [`Real`] (f32, f64).
//! One impl per type, written by the macros below.

use ndarray::{Array2, ArrayView2};

use crate::exec::tensor::Element;

/// A numeric element type: f32, f64, i32 or i64.
///
/// Integer arithmetic wraps instead of overflowing; callers check integer
/// divisors for zero before calling [`Num::div`] or [`Num::floor_div`].
pub(crate) trait Num: Element + Copy + PartialOrd + Default {
    const IS_FLOAT: bool;
    fn zero() -> Self;
    fn one() -> Self;
    fn from_usize(n: usize) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn floor_div(self, o: Self) -> Self;
    /// `None` for an integer to a negative power.
    fn pow(self, o: Self) -> Option<Self>;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn is_zero(self) -> bool;
    fn as_f32(self) -> f32;
    fn as_f64(self) -> f64;
    fn as_i32(self) -> i32;
    fn as_i64(self) -> i64;
    /// The matrix product `a · b` of 2-D views.
    fn matmul(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>) -> Array2<Self>;
    /// `out = a · b`, written in place; the views may have any strides.
    fn matmul_into(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>, mut out: ndarray::ArrayViewMut2<'_, Self>) {
        out.assign(&Self::matmul(a, b));
    }
}

macro_rules! float_num {
    ($t:ty) => {
        impl Num for $t {
            const IS_FLOAT: bool = true;
            fn zero() -> Self {
                0.0
            }
            fn one() -> Self {
                1.0
            }
            fn from_usize(n: usize) -> Self {
                n as $t
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn floor_div(self, o: Self) -> Self {
                (self / o).floor()
            }
            fn pow(self, o: Self) -> Option<Self> {
                Some(self.powf(o))
            }
            fn neg(self) -> Self {
                -self
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn is_zero(self) -> bool {
                self == 0.0
            }
            fn as_f32(self) -> f32 {
                self as f32
            }
            fn as_f64(self) -> f64 {
                self as f64
            }
            fn as_i32(self) -> i32 {
                self as i32
            }
            fn as_i64(self) -> i64 {
                self as i64
            }
            fn matmul(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>) -> Array2<Self> {
                a.dot(&b)
            }
            fn matmul_into(
                a: ArrayView2<'_, Self>,
                b: ArrayView2<'_, Self>,
                mut out: ndarray::ArrayViewMut2<'_, Self>,
            ) {
                ndarray::linalg::general_mat_mul(1.0, &a, &b, 0.0, &mut out);
            }
        }
    };
}

macro_rules! int_num {
    ($t:ty) => {
        impl Num for $t {
            const IS_FLOAT: bool = false;
            fn zero() -> Self {
                0
            }
            fn one() -> Self {
                1
            }
            fn from_usize(n: usize) -> Self {
                n as $t
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div(self, o: Self) -> Self {
                self.wrapping_div(o)
            }
            fn floor_div(self, o: Self) -> Self {
                let q = self.wrapping_div(o);
                // `wrapping_rem` keeps `MIN % -1` (which is 0) from panicking.
                if (self.wrapping_rem(o) != 0) && ((self < 0) != (o < 0)) {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
            fn pow(self, o: Self) -> Option<Self> {
                u32::try_from(o).ok().map(|e| self.wrapping_pow(e))
            }
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            fn abs(self) -> Self {
                self.wrapping_abs()
            }
            fn is_zero(self) -> bool {
                self == 0
            }
            fn as_f32(self) -> f32 {
                self as f32
            }
            fn as_f64(self) -> f64 {
                self as f64
            }
            fn as_i32(self) -> i32 {
                self as i32
            }
            fn as_i64(self) -> i64 {
                self as i64
            }
            fn matmul(a: ArrayView2<'_, Self>, b: ArrayView2<'_, Self>) -> Array2<Self> {
                let (m, k) = a.dim();
                let n = b.dim().1;
                Array2::from_shape_fn((m, n), |(i, j)| {
                    (0..k).fold(0, |acc: $t, p| acc.wrapping_add(a[(i, p)].wrapping_mul(b[(p, j)])))
                })
            }
        }
    };
}

float_num!(f32);
float_num!(f64);
int_num!(i32);
int_num!(i64);

/// A floating-point element type: f32 or f64.
pub(crate) trait Real:
    Num
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Rem<Output = Self>
    + std::ops::Neg<Output = Self>
{
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn tanh(self) -> Self;
    fn sqrt(self) -> Self;
    fn floor(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn erfc(self) -> Self;
    fn is_nan(self) -> bool;
    fn neg_infinity() -> Self;
}

macro_rules! real {
    ($t:ty, $erfc:path) => {
        impl Real for $t {
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            fn erfc(self) -> Self {
                $erfc(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn neg_infinity() -> Self {
                <$t>::NEG_INFINITY
            }
        }
    };
}

real!(f32, libm::erfcf);
real!(f64, libm::erfc);
