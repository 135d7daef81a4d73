//! Unpacked SIMD f32 matrix products for row-major operands: wasm simd128, and x86-64
//! AVX2+FMA (checked at run time; other machines use matrixmultiply).
//!
//! matrixmultiply has hand-written x86 and ARM kernels but only a portable one elsewhere;
//! in wasm that one leaves most of simd128 unused. And on x86 it packs both operands,
//! which for the shapes of a GNN layer (thousands of rows, a K of 80–160) costs as much as
//! a good part of the product. These kernels read `A`'s rows in place and compute a block of
//! `C` per step against a strip of columns of `B` (4 rows × 8 columns with `f32x4` in wasm,
//! 4 rows × 16 columns with AVX `__m256` natively), broadcasting `A[i, p]` against row `p`
//! of `B`.

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use core::arch::wasm32::*;

/// `c = a @ b` with `a[m,k]`, `b[k,n]`, `c[m,n]`, all row-major and contiguous.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub fn gemm_nn(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm_nn: operand sizes");
    let n8 = n / 8 * 8;
    let m4 = m / 4 * 4;
    // SAFETY: every pointer below stays inside a[..m*k], b[..k*n] and c[..m*n] (checked
    // above): rows i..i+4 < m4 ≤ m, columns j..j+8 ≤ n8 ≤ n, p < k; wasm loads and stores
    // of v128 need no alignment.
    unsafe {
        let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        let mut i = 0;
        while i < m4 {
            let (a0, a1, a2, a3) = (ap.add(i * k), ap.add((i + 1) * k), ap.add((i + 2) * k), ap.add((i + 3) * k));
            let mut j = 0;
            while j < n8 {
                let z = f32x4_splat(0.0);
                let (mut c00, mut c01, mut c10, mut c11) = (z, z, z, z);
                let (mut c20, mut c21, mut c30, mut c31) = (z, z, z, z);
                for p in 0..k {
                    let brow = bp.add(p * n + j);
                    let b0 = v128_load(brow as *const v128);
                    let b1 = v128_load(brow.add(4) as *const v128);
                    let x0 = v128_load32_splat(a0.add(p) as *const u32);
                    c00 = f32x4_add(c00, f32x4_mul(x0, b0));
                    c01 = f32x4_add(c01, f32x4_mul(x0, b1));
                    let x1 = v128_load32_splat(a1.add(p) as *const u32);
                    c10 = f32x4_add(c10, f32x4_mul(x1, b0));
                    c11 = f32x4_add(c11, f32x4_mul(x1, b1));
                    let x2 = v128_load32_splat(a2.add(p) as *const u32);
                    c20 = f32x4_add(c20, f32x4_mul(x2, b0));
                    c21 = f32x4_add(c21, f32x4_mul(x2, b1));
                    let x3 = v128_load32_splat(a3.add(p) as *const u32);
                    c30 = f32x4_add(c30, f32x4_mul(x3, b0));
                    c31 = f32x4_add(c31, f32x4_mul(x3, b1));
                }
                for (r, (lo, hi)) in [(c00, c01), (c10, c11), (c20, c21), (c30, c31)].into_iter().enumerate() {
                    let out = cp.add((i + r) * n + j);
                    v128_store(out as *mut v128, lo);
                    v128_store(out.add(4) as *mut v128, hi);
                }
                j += 8;
            }
            for r in i..i + 4 {
                tail_columns(ap.add(r * k), bp, cp.add(r * n), k, n, n8);
            }
            i += 4;
        }
        while i < m {
            let ar = ap.add(i * k);
            let mut j = 0;
            while j < n8 {
                let (mut lo, mut hi) = (f32x4_splat(0.0), f32x4_splat(0.0));
                for p in 0..k {
                    let brow = bp.add(p * n + j);
                    let x = f32x4_splat(*ar.add(p));
                    lo = f32x4_add(lo, f32x4_mul(x, v128_load(brow as *const v128)));
                    hi = f32x4_add(hi, f32x4_mul(x, v128_load(brow.add(4) as *const v128)));
                }
                let out = cp.add(i * n + j);
                v128_store(out as *mut v128, lo);
                v128_store(out.add(4) as *mut v128, hi);
                j += 8;
            }
            tail_columns(ar, bp, cp.add(i * n), k, n, n8);
            i += 1;
        }
    }
}

/// Columns `from..n` of one output row, scalar (the tail both SIMD kernels leave).
///
/// # Safety
/// `arow` must point at `k` values, `b` at `k*n`, `crow` at `n`.
#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
unsafe fn tail_columns(arow: *const f32, b: *const f32, crow: *mut f32, k: usize, n: usize, from: usize) {
    // SAFETY: the caller's contract above.
    unsafe {
        for j in from..n {
            let mut s = 0f32;
            for p in 0..k {
                s += *arow.add(p) * *b.add(p * n + j);
            }
            *crow.add(j) = s;
        }
    }
}

/// `c = a @ w^T` with `a[m,k]`, `w[n,k]` (a Linear weight): `w` is transposed once into a
/// `[k,n]` buffer (small next to `a`), then [`gemm_nn`].
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub fn gemm_nt(a: &[f32], w: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    gemm_nn(a, &transpose_into(w, n, k), c, m, k, n);
}

/// `c = a @ b` (row-major, contiguous) with AVX2+FMA when the CPU has them; returns false
/// (computing nothing) otherwise, so the caller falls back to matrixmultiply.
#[cfg(target_arch = "x86_64")]
pub fn gemm_nn_x86(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) -> bool {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        return false;
    }
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm_nn_x86: operand sizes");
    // SAFETY: the CPU has AVX2 and FMA (checked above); sizes checked.
    unsafe { gemm_nn_avx(a, b, c, m, k, n) };
    true
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_nn_avx(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    use std::arch::x86_64::*;
    let n16 = n / 16 * 16;
    let m4 = m / 4 * 4;
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
    // SAFETY (all pointer arithmetic): rows < m, columns < n, p < k, as in the wasm kernel.
    unsafe {
        let mut i = 0;
        while i < m4 {
            let rows = [ap.add(i * k), ap.add((i + 1) * k), ap.add((i + 2) * k), ap.add((i + 3) * k)];
            let mut j = 0;
            while j < n16 {
                let z = _mm256_setzero_ps();
                let mut acc = [[z; 2]; 4];
                for p in 0..k {
                    let brow = bp.add(p * n + j);
                    let b0 = _mm256_loadu_ps(brow);
                    let b1 = _mm256_loadu_ps(brow.add(8));
                    for r in 0..4 {
                        let x = _mm256_broadcast_ss(&*rows[r].add(p));
                        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
                        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
                    }
                }
                for (r, v) in acc.iter().enumerate() {
                    let out = cp.add((i + r) * n + j);
                    _mm256_storeu_ps(out, v[0]);
                    _mm256_storeu_ps(out.add(8), v[1]);
                }
                j += 16;
            }
            for r in i..i + 4 {
                tail_columns(ap.add(r * k), bp, cp.add(r * n), k, n, n16);
            }
            i += 4;
        }
        while i < m {
            let ar = ap.add(i * k);
            let mut j = 0;
            while j < n16 {
                let (mut lo, mut hi) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                for p in 0..k {
                    let brow = bp.add(p * n + j);
                    let x = _mm256_broadcast_ss(&*ar.add(p));
                    lo = _mm256_fmadd_ps(x, _mm256_loadu_ps(brow), lo);
                    hi = _mm256_fmadd_ps(x, _mm256_loadu_ps(brow.add(8)), hi);
                }
                let out = cp.add(i * n + j);
                _mm256_storeu_ps(out, lo);
                _mm256_storeu_ps(out.add(8), hi);
                j += 16;
            }
            tail_columns(ar, bp, cp.add(i * n), k, n, n16);
            i += 1;
        }
    }
}

/// Transposes `w[n,k]` into `[k,n]`.
pub fn transpose_into(w: &[f32], n: usize, k: usize) -> Vec<f32> {
    let mut wt = vec![0f32; k * n];
    for (o, row) in w.chunks_exact(k.max(1)).take(n).enumerate() {
        for (p, &v) in row.iter().enumerate() {
            wt[p * n + o] = v;
        }
    }
    wt
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn avx_kernel_matches_a_plain_loop_with_row_and_column_tails() {
        let mut rng = Rng::new(4);
        for &(m, k, n) in &[(1, 1, 16), (7, 5, 17), (13, 80, 80), (4, 3, 32), (33, 17, 41), (2000, 80, 80)] {
            let a: Vec<f32> = (0..m * k).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
            let mut c = vec![f32::NAN; m * n];
            if !gemm_nn_x86(&a, &b, &mut c, m, k, n) {
                return; // no AVX2/FMA here: matrixmultiply is used instead
            }
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                    assert!((c[i * n + j] - want).abs() < 1e-4, "{m}x{k}x{n} [{i},{j}]: {} vs {want}", c[i * n + j]);
                }
            }
        }
        let w: Vec<f32> = (0..6).map(|v| v as f32).collect(); // [2,3]
        assert_eq!(transpose_into(&w, 2, 3), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }
}
