//! A wasm SIMD (simd128) f32 matrix product for row-major operands.
//!
//! matrixmultiply has hand-written x86 and ARM kernels but only a portable one elsewhere;
//! in wasm that one leaves most of simd128 unused. This kernel computes 4 rows × 8 columns
//! of `C` per step with eight `f32x4` accumulators (a broadcast of `A[i, p]` times two
//! vectors of row `p` of `B`), which is what the shapes of a GNN layer (thousands of rows,
//! 80–160 columns) need. Natively the crate keeps matrixmultiply.

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
                    let x0 = f32x4_splat(*a0.add(p));
                    c00 = f32x4_add(c00, f32x4_mul(x0, b0));
                    c01 = f32x4_add(c01, f32x4_mul(x0, b1));
                    let x1 = f32x4_splat(*a1.add(p));
                    c10 = f32x4_add(c10, f32x4_mul(x1, b0));
                    c11 = f32x4_add(c11, f32x4_mul(x1, b1));
                    let x2 = f32x4_splat(*a2.add(p));
                    c20 = f32x4_add(c20, f32x4_mul(x2, b0));
                    c21 = f32x4_add(c21, f32x4_mul(x2, b1));
                    let x3 = f32x4_splat(*a3.add(p));
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

/// Columns `from..n` of one output row, scalar.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
unsafe fn tail_columns(arow: *const f32, b: *const f32, crow: *mut f32, k: usize, n: usize, from: usize) {
    for j in from..n {
        let mut s = 0f32;
        for p in 0..k {
            s += *arow.add(p) * *b.add(p * n + j);
        }
        *crow.add(j) = s;
    }
}

/// `c = a @ w^T` with `a[m,k]`, `w[n,k]` (a Linear weight): `w` is transposed once into a
/// `[k,n]` buffer (small next to `a`), then [`gemm_nn`].
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub fn gemm_nt(a: &[f32], w: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) {
    let mut wt = vec![0f32; k * n];
    for (o, row) in w.chunks_exact(k.max(1)).take(n).enumerate() {
        for (p, &v) in row.iter().enumerate() {
            wt[p * n + o] = v;
        }
    }
    gemm_nn(a, &wt, c, m, k, n);
}
