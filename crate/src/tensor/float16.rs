//! float16 ⇄ float32, exact (IEEE 754 binary16, round to nearest even, overflow to ±inf,
//! subnormals kept, NaN stays NaN), and float32 → nearest float16 value as a float32
//! ([`round`]), written as straight-line code: every element takes the same few integer and
//! float operations and one select, so the loops over a tensor compile without a branch
//! per element and vectorize.
//!
//! A float16 tensor holds its values as float32 ([`crate::tensor::Tensor::F16`]); the kernels
//! compute on them as they are and [`round`] each result in place, so [`to_f32`] and
//! [`from_f32`] are needed only at the edges (binary16 bits in and out).
//!
//! Why not `half::f16::to_f32` / `from_f32`: their fast paths are x86's F16C and aarch64's
//! FP16 instructions; everywhere else (WebAssembly, where the page runs) they take a portable
//! path that branches per element. Ours are checked against `half`'s for every float16 and
//! around every float16 rounding boundary.

use half::f16;
use ndarray::ArrayD;

/// The float32 equal to `h`.
#[inline]
pub fn to_f32(h: f16) -> f32 {
    let h = h.to_bits() as u32;
    let sign = (h & 0x8000) << 16;
    // The exponent and mantissa.
    let rest = h & 0x7fff;
    // A normal number: the exponent rebiased from 15 to 127 (+112), the mantissa moved up 13.
    let normal = (rest << 13) + (112 << 23);
    // Exponent 31 (inf, NaN): float32's all-ones exponent, the mantissa (NaN payload) kept.
    let special = (rest << 13) | 0x7f80_0000;
    // Exponent 0 (zero, subnormal): mantissa × 2^-24, exact in float32 (both factors are).
    let tiny = (rest as f32 * (1.0 / 16_777_216.0)).to_bits();
    let bits = if rest >= 0x7c00 {
        special
    } else if rest < 0x0400 {
        tiny
    } else {
        normal
    };
    f32::from_bits(bits | sign)
}

/// `x` rounded to the nearest float16 (ties to even).
#[inline]
pub fn from_f32(x: f32) -> f16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    // |x|
    let a = b & 0x7fff_ffff;
    // Normal range: drop 13 mantissa bits rounding to nearest even (add half an ulp less one,
    // plus the kept lowest bit), then rebias the exponent; a carry out of the mantissa moves
    // to the next exponent, and past the largest one it lands exactly on inf (0x7c00).
    let odd = (a >> 13) & 1;
    let normal = (a.wrapping_sub(112 << 23).wrapping_add(0x0fff + odd) >> 13) as u16;
    // Below float16's smallest normal (2^-14): adding 0.5 rounds |x| to a multiple of 2^-24
    // (0.5's ulp) by the float unit's own nearest-even rounding; the bits above 0.5's are the
    // subnormal mantissa (2^10 of them is the smallest normal, encoded the same way).
    let tiny = ((f32::from_bits(a) + 0.5).to_bits() - 0x3f00_0000) as u16;
    // NaN: quiet, with the payload's top bits; too large for float16: inf.
    let nan = 0x7e00 | ((a >> 13) & 0x3ff) as u16;
    let h = if a > 0x7f80_0000 {
        nan
    } else if a >= 0x4780_0000 {
        0x7c00
    } else if a < 0x3880_0000 {
        tiny
    } else {
        normal
    };
    f16::from_bits(h | sign)
}

/// `x` rounded to the nearest float16 value, as a float32: `to_f32(from_f32(x))` bit for bit
/// (NaN quiet, with the payload's top ten bits; checked for every float32), in a few integer
/// and float operations and two selects. A float16 tensor's storage holds such values
/// ([`crate::tensor::Tensor::F16`]).
///
/// The float unit rounds: adding `c = 2^(e+13)`, `e` being `|x|`'s exponent, leaves `|x|`
/// with float16's 11 significant bits (the ulp of `c` is float16's ulp at `e`), to nearest
/// even, and taking `c` away again is exact. `e` is held at -14 or above (float16's
/// subnormals share the ulp 2^-24) and at 16 or below (larger values are infinite anyway,
/// and `c` stays finite). A result of 65536 or more (65520 rounds up to it) is infinite.
#[inline]
pub fn round(x: f32) -> f32 {
    // Signed integers: wasm SIMD compares those natively (unsigned ones it emulates).
    let b = x.to_bits() as i32;
    let sign = b & i32::MIN;
    let a = b & 0x7fff_ffff;
    let c = f32::from_bits(((a & 0x7f80_0000).clamp(0x3880_0000, 0x4780_0000) + (13 << 23)) as u32);
    let r = ((f32::from_bits(a as u32) + c) - c).to_bits() as i32;
    let r = if r >= 0x4780_0000 { 0x7f80_0000 } else { r };
    // NaN: quiet, the payload's top bits (the arithmetic's NaN is not deterministic in wasm).
    let r = if a > 0x7f80_0000 { (a & 0x7fff_e000) | 0x7fc0_0000 } else { r };
    f32::from_bits((r | sign) as u32)
}

/// [`round`] for `x` of magnitude zero or in float16's normal range below the rounding
/// point to inf, `2^-14 ≤ |x| < 65520` ([`NORMAL_LO`], [`NORMAL_END`]), bit for bit: `c`
/// carries `x`'s sign and exponent plus 13, so `(x + c) − c` rounds `x` to float16's 11
/// significant bits for either sign (round to nearest even is symmetric), and `x`'s sign
/// OR-ed back keeps −0 (which comes out +0). Four integer and float operations, no select.
#[inline(always)]
fn round_normal(x: f32) -> f32 {
    let b = x.to_bits();
    let c = f32::from_bits((b & 0xff80_0000) + (13 << 23));
    f32::from_bits(((x + c) - c).to_bits() | (b & 0x8000_0000))
}

/// Bits of float16's smallest normal, 2^-14, as a float32.
const NORMAL_LO: u32 = 0x3880_0000;
/// Bits of 65520, a float32's magnitude from which it rounds to float16's inf.
const NORMAL_END: u32 = 0x477f_f000;

/// Values per block of [`round_slice`]: 256 bytes, in L1 between its two passes.
const BLOCK: usize = 64;

/// Rounds every element of `a` to the nearest float16 value, in place: [`round`] bit for
/// bit, about three times faster in wasm. A block at a time: one pass finds the least
/// nonzero and the greatest magnitude (integer min and max, no branch), and where every
/// value is zero or in float16's normal range, as a network's activations and gradients
/// almost always are, a second pass rounds with [`round_normal`]; a block holding a
/// subnormal, an overflowing value, an inf or a NaN takes [`round`].
pub fn round_slice(a: &mut [f32]) {
    for block in a.chunks_mut(BLOCK) {
        let (mut least, mut most) = (u32::MAX, 0u32);
        for x in block.iter() {
            let m = x.to_bits() & 0x7fff_ffff;
            // zero wraps to u32::MAX, out of the way of the least nonzero magnitude
            least = least.min(m.wrapping_sub(1));
            most = most.max(m);
        }
        if least >= NORMAL_LO - 1 && most < NORMAL_END {
            block.iter_mut().for_each(|x| *x = round_normal(*x));
        } else {
            block.iter_mut().for_each(|x| *x = round(*x));
        }
    }
}

/// Rounds every element of `a` to the nearest float16 value, in place (any layout).
pub fn round_array(a: &mut ArrayD<f32>) {
    match a.as_slice_memory_order_mut() {
        Some(s) => round_slice(s),
        None => a.mapv_inplace(round),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: f32, b: f32) -> bool {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.is_sign_negative() == b.is_sign_negative())
    }

    #[test]
    fn every_float16_widens_as_the_half_crate_widens_it() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            assert!(same(to_f32(h), h.to_f32()), "{bits:#06x}: {} vs {}", to_f32(h), h.to_f32());
            if !h.is_nan() {
                assert_eq!(from_f32(to_f32(h)).to_bits(), bits, "{bits:#06x} does not come back");
            }
        }
    }

    #[test]
    fn rounding_matches_the_half_crate_at_and_around_every_boundary() {
        let mut check = |x: f32| {
            let (ours, theirs) = (from_f32(x), f16::from_f32(x));
            let ok = ours.to_bits() == theirs.to_bits()
                || (ours.is_nan() && theirs.is_nan() && ours.is_sign_negative() == theirs.is_sign_negative());
            assert!(
                ok,
                "{x:e} ({:#010x}): ours {:#06x}, half's {:#06x}",
                x.to_bits(),
                ours.to_bits(),
                theirs.to_bits()
            );
        };
        // The midpoint between each pair of neighbouring float16s (a tie), and the float32s
        // a few ulps either side of it and of each float16 itself.
        around_every_float16(&mut check);
        // Past the largest float16 (65504; 65520 is the tie to inf), infinities, NaNs, and a
        // sweep over all of float32.
        for x in
            [65504.0f32, 65519.996, 65520.0, 65536.0, 1e10, f32::MAX, f32::INFINITY, f32::NAN, f32::MIN_POSITIVE, 1e-45]
        {
            check(x);
            check(-x);
        }
        check(f32::from_bits(0x7f80_0001)); // a signalling NaN
        check(f32::from_bits(0xffc1_2345));
        for bits in (0..=u32::MAX).step_by(997) {
            check(f32::from_bits(bits));
        }
    }

    /// Calls `f` with each float16 and each midpoint between neighbouring float16s (a tie),
    /// and the float32s a few ulps either side of them, of both signs.
    fn around_every_float16(f: &mut dyn FnMut(f32)) {
        for bits in 0..0x7c00u16 {
            let lo = f16::from_bits(bits).to_f32() as f64;
            let hi = f16::from_bits(bits + 1).to_f32() as f64;
            for v in [lo, (lo + hi) / 2.0] {
                let mid = (v as f32).to_bits();
                for d in 0..4u32 {
                    for s in [0u32, 0x8000_0000] {
                        f(f32::from_bits((mid + d) | s));
                        f(f32::from_bits(mid.saturating_sub(d) | s));
                    }
                }
            }
        }
    }

    /// `round` is `to_f32(from_f32(x))`, bit for bit.
    fn check_round(x: f32) {
        let (ours, two_step) = (round(x), to_f32(from_f32(x)));
        assert_eq!(ours.to_bits(), two_step.to_bits(), "{x:e} ({:#010x}): {ours:e} vs {two_step:e}", x.to_bits());
    }

    #[test]
    fn round_is_narrow_then_widen_around_every_boundary_and_across_float32() {
        around_every_float16(&mut check_round);
        for x in [0.0, 65504.0f32, 65519.996, 65520.0, 65536.0, 1e10, f32::MAX, f32::INFINITY, f32::NAN, 1e-45] {
            check_round(x);
            check_round(-x);
        }
        check_round(f32::from_bits(0x7f80_0001));
        check_round(f32::from_bits(0xffc1_2345));
        // (every float32 was checked once, in a release build: 2^32 values, no difference)
        for bits in (0..=u32::MAX).step_by(331) {
            check_round(f32::from_bits(bits));
        }
        for e in 0..255u32 {
            for m in [0, 1, 0x1000, 0x1fff, 0x2000, 0x3000, 0x7f_ffff] {
                check_round(f32::from_bits((e << 23) | m));
                check_round(f32::from_bits((e << 23) | m | 0x8000_0000));
            }
        }
    }

    /// `round_slice` against `round`, one element at a time: blocks of normal values only
    /// (its fast path), and the same with one value of each kind the fast path leaves out
    /// (subnormal, past 65520, inf, NaN) at each place in a block.
    #[test]
    fn round_slice_is_round_on_every_block() {
        let check = |v: &[f32]| {
            let mut r = v.to_vec();
            round_slice(&mut r);
            for (i, (&x, &y)) in v.iter().zip(&r).enumerate() {
                let want = round(x);
                assert!(
                    y.to_bits() == want.to_bits(),
                    "element {i}: {x:e} ({:#010x}) rounds to {y:e} ({:#010x}), round gives {want:e} ({:#010x})",
                    x.to_bits(),
                    y.to_bits(),
                    want.to_bits()
                );
            }
        };
        // every float32 at a prime stride, in blocks as they come (mixed: mostly the slow
        // path) and with the magnitudes outside the fast path's range left out (fast path)
        let sweep: Vec<f32> = (0..=u32::MAX).step_by(997).map(f32::from_bits).collect();
        check(&sweep);
        let normal: Vec<f32> = sweep
            .iter()
            .copied()
            .filter(|x| x.abs() == 0.0 || (x.abs() >= 2f32.powi(-14) && x.abs() < 65520.0))
            .collect();
        check(&normal);
        // the edges of the fast path's range, and around every float16
        let mut edges = vec![0.0f32, -0.0, 65504.0, 65519.996, -65519.996, 2f32.powi(-14), -2f32.powi(-14)];
        around_every_float16(&mut |x| {
            if x.abs() == 0.0 || (x.abs() >= 2f32.powi(-14) && x.abs() < 65520.0) {
                edges.push(x)
            }
        });
        check(&edges);
        for odd in [1e-6f32, 2f32.powi(-15), -1e-40, 65520.0, -7e4, f32::INFINITY, f32::NAN, 2f32.powi(-14) * 0.999] {
            for at in 0..BLOCK + 3 {
                let mut v = edges[..2 * BLOCK + 3].to_vec();
                v[at] = odd;
                check(&v);
            }
        }
    }

    #[test]
    fn round_array_rounds_any_layout_in_place() {
        let a = ArrayD::from_shape_vec(vec![2, 3], vec![1.0f32, -2.5, 65520.0, 1e-8, 0.1, f32::NAN]).unwrap();
        let mut r = a.clone();
        round_array(&mut r);
        assert_eq!(&r.as_slice().unwrap()[..4], &[1.0, -2.5, f32::INFINITY, 0.0]);
        assert_eq!(r[[1, 1]], f16::from_f32(0.1).to_f32());
        assert!(r[[1, 2]].is_nan());
        let mut t = a.t().to_owned();
        assert!(t.as_slice().is_none(), "a column-major copy");
        round_array(&mut t);
        let want = a.t().mapv(|x| f16::from_f32(x).to_f32());
        assert!(t.iter().zip(want.iter()).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())));
    }
}
