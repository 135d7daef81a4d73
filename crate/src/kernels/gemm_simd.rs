//! Unpacked SIMD f32 matrix products: wasm simd128 (with relaxed-SIMD fused multiply-adds
//! in the browser build), x86-64 AVX-512 and AVX2+FMA (picked at run time; other machines
//! use matrixmultiply).
//!
//! matrixmultiply has hand-written x86 and ARM kernels but only a portable one elsewhere;
//! in wasm that one leaves most of simd128 unused. And on x86 it packs both operands,
//! which for the shapes of a GNN layer (thousands of rows, a K of 80–160) costs as much as
//! a good part of the product. These kernels read `A` in place, through strides (so a
//! transposed `A`, a Linear's weight gradient `gᵀ @ x`, needs no copy), and compute a
//! block of `C` per step against a strip of columns of `B`, broadcasting `A[i, p]` against
//! row `p` of `B`: 4 rows × 8 columns with `f32x4` in wasm, 6 rows × up to 64 columns with
//! `__m512` (4 rows × 16 with `__m256` in the AVX2 fallback). A long `k` is cut into panels
//! of `B` that stay in L1; a bias is where the accumulators start.

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use core::arch::wasm32::*;

/// `c + a·b` lane-wise: one fused multiply-add where the build has relaxed SIMD (half the
/// instructions of the plain product, which is what bounds this kernel), else mul then add.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline(always)]
fn madd(a: v128, b: v128, c: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        f32x4_relaxed_madd(a, b, c)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        f32x4_add(c, f32x4_mul(a, b))
    }
}

/// What `C` starts from before `op(a) @ b` is added: a bias (one value per column, for
/// every row), an addend (a full `[m, n]` matrix: a fused `Linear + residual`), both, or
/// nothing (zero).
#[derive(Clone, Copy, Default)]
pub struct Start<'a> {
    pub bias: Option<&'a [f32]>,
    pub addend: Option<&'a [f32]>,
}

/// One product for the strided kernels, checked and in raw form: `C[m,n] = start + A @ B`
/// with `A(i, p) = a[i*rs + p*cs]` (`a @ b`: rs = k, cs = 1; `aᵀ @ b` for a stored `[k,m]`:
/// rs = 1, cs = m), `B` row-major `[k,n]`, `C` and the addend row-major `[m,n]`.
#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
#[derive(Clone, Copy)]
struct Problem {
    a: *const f32,
    rs: usize,
    cs: usize,
    b: *const f32,
    bias: Option<*const f32>,
    addend: Option<*const f32>,
    c: *mut f32,
    m: usize,
    k: usize,
    n: usize,
    /// Round every entry of `C` to the nearest float16 once it is final.
    half: bool,
}

#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
impl Problem {
    /// Checks every operand's size against the shapes (a caller's bug panics), so that the
    /// kernels' pointers stay inside them.
    #[allow(clippy::too_many_arguments)]
    fn new(
        a: &[f32],
        a_transposed: bool,
        b: &[f32],
        start: Start,
        c: &mut [std::mem::MaybeUninit<f32>],
        m: usize,
        k: usize,
        n: usize,
        half: bool,
    ) -> Problem {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n, "gemm_strided: operand sizes");
        assert!(start.bias.is_none_or(|v| v.len() >= n), "gemm_strided: bias size");
        assert!(start.addend.is_none_or(|v| v.len() >= m * n), "gemm_strided: addend size");
        let (rs, cs) = if a_transposed { (1, m) } else { (k, 1) };
        Problem {
            a: a.as_ptr(),
            rs,
            cs,
            b: b.as_ptr(),
            bias: start.bias.map(|v| v.as_ptr()),
            addend: start.addend.map(|v| v.as_ptr()),
            c: c.as_mut_ptr().cast(),
            m,
            k,
            n,
            half,
        }
    }

    /// Rounds rows `rows` of `C` to float16 in place, where `half` (called on a block of
    /// rows as soon as its last panel is added, while it is in cache).
    ///
    /// # Safety
    /// The rows lie inside `C` and have been written.
    #[inline]
    unsafe fn finish_rows(&self, rows: std::ops::Range<usize>) {
        if self.half {
            // SAFETY: the caller's contract.
            let c = unsafe { std::slice::from_raw_parts_mut(self.c.add(rows.start * self.n), rows.len() * self.n) };
            crate::tensor::float16::round_slice(c);
        }
    }
}

/// `c = start + op(a) @ b` with the strided kernel of this target, where `op(a)` is
/// `a[m,k]` or, with `a_transposed`, the transpose of an `a` stored as `[k,m]` (a Linear's
/// weight gradient `gᵀ @ x`, read in place), and `start` a bias and/or an addend
/// ([`Start`]); with `half`, each entry rounded to the nearest float16 (a block of rows at
/// a time, as it is finished). Writes all `m*n` entries of `c` (so it may start
/// uninitialised).
///
/// The kernels: wasm simd128 (blocks of 4 rows × 8 columns, two `f32x4` per row, 8
/// accumulators: V8 has 16 vector registers on x86-64; a scalar tail for the last `n % 8`
/// columns; `k` in panels of `wasm::KC` rows of `B`) and AVX-512 where the CPU has it (see
/// `avx512`). Returns false, computing nothing, where neither runs: the caller then uses
/// the AVX2 kernel or matrixmultiply.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(all(target_arch = "wasm32", target_feature = "simd128"), allow(unreachable_code))]
#[cfg_attr(
    not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128"))),
    allow(unused_variables)
)]
pub fn gemm_strided(
    a: &[f32],
    a_transposed: bool,
    b: &[f32],
    start: Start,
    c: &mut [std::mem::MaybeUninit<f32>],
    m: usize,
    k: usize,
    n: usize,
    half: bool,
) -> bool {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        let p = Problem::new(a, a_transposed, b, start, c, m, k, n, half);
        // SAFETY: the operands' sizes are checked by Problem::new; wasm loads and stores of
        // v128 need no alignment.
        unsafe { wasm::gemm(p) };
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx512f") {
        let p = Problem::new(a, a_transposed, b, start, c, m, k, n, half);
        // SAFETY: the CPU has AVX-512F (checked); the operands' sizes are checked by
        // Problem::new.
        unsafe { avx512::gemm(p) };
        return true;
    }
    false
}

/// What a block's accumulators start from (shared by the strided kernels).
#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
#[derive(Clone, Copy)]
enum Init {
    /// The first panel of `k`: the addend's rows (pointing at the block's first entry, row
    /// stride that of `C`) plus the bias (pointing at the block's first column), either of
    /// which may be absent (zero).
    Fresh { bias: Option<*const f32>, addend: Option<*const f32> },
    /// The block's current values in `C` (a later panel of `k`).
    Accumulate,
}

#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
impl Init {
    /// The init for the panel starting at step `p0`, for the block whose first entry is
    /// `(row, col)` of an `[m, ld]` output.
    fn for_block(
        bias: Option<*const f32>,
        addend: Option<*const f32>,
        p0: usize,
        row: usize,
        col: usize,
        ld: usize,
    ) -> Init {
        if p0 > 0 {
            return Init::Accumulate;
        }
        // (the later reads stay inside the caller's bias of n > col and addend of m*n values)
        Init::Fresh { bias: bias.map(|v| v.wrapping_add(col)), addend: addend.map(|v| v.wrapping_add(row * ld + col)) }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm {
    use super::{madd, Init, Problem};
    use core::arch::wasm32::*;

    /// Rows of `B` per panel: 128 × 80 floats = 40 KiB.
    pub(super) const KC: usize = 128;

    /// # Safety
    /// `p` was made by [`Problem::new`] from live operands.
    pub(super) unsafe fn gemm(p: Problem) {
        let Problem { a, rs, cs, b, bias, addend, c, m, k, n, .. } = p;
        let n8 = n / 8 * 8;
        let mut p0 = 0;
        loop {
            let kc = KC.min(k - p0);
            // SAFETY: rows < m, columns < n, steps p0..p0+kc ≤ k (the caller's contract).
            unsafe {
                let mut i = 0;
                while i < m {
                    let rows = if m - i >= 4 { 4 } else { 1 };
                    let ab = a.add(i * rs + p0 * cs);
                    let mut j = 0;
                    while j < n8 {
                        let (bb, cb) = (b.add(p0 * n + j), c.add(i * n + j));
                        let init = Init::for_block(bias, addend, p0, i, j, n);
                        if rows == 4 {
                            block4(ab, rs, cs, bb, n, cb, kc, init);
                        } else {
                            block1(ab, cs, bb, n, cb, kc, init);
                        }
                        j += 8;
                    }
                    for r in 0..rows {
                        for j in n8..n {
                            let cij = c.add((i + r) * n + j);
                            let mut s = match Init::for_block(bias, addend, p0, i + r, j, n) {
                                Init::Fresh { bias, addend } => bias.map_or(0.0, |v| *v) + addend.map_or(0.0, |v| *v),
                                Init::Accumulate => *cij,
                            };
                            for p in 0..kc {
                                s += *ab.add(r * rs + p * cs) * *b.add((p0 + p) * n + j);
                            }
                            *cij = s;
                        }
                    }
                    if p0 + kc >= k {
                        p.finish_rows(i..i + rows);
                    }
                    i += rows;
                }
            }
            p0 += kc;
            if p0 >= k {
                break;
            }
        }
    }

    /// The accumulators' start for `R` rows of 8 columns at `c` (row stride `ld`).
    #[inline(always)]
    unsafe fn start<const R: usize>(init: Init, c: *const f32, ld: usize) -> [[v128; 2]; R] {
        // SAFETY: the caller's block lies inside C (and the addend); a bias holds the
        // block's 8 columns.
        unsafe {
            let row = |p: *const f32, r: usize| {
                [v128_load(p.add(r * ld) as *const v128), v128_load(p.add(r * ld + 4) as *const v128)]
            };
            match init {
                Init::Fresh { bias, addend } => {
                    let b = bias.map(|v| row(v, 0));
                    core::array::from_fn(|r| {
                        let a = addend.map_or([f32x4_splat(0.0); 2], |v| row(v, r));
                        b.map_or(a, |b| [f32x4_add(a[0], b[0]), f32x4_add(a[1], b[1])])
                    })
                }
                Init::Accumulate => core::array::from_fn(|r| row(c, r)),
            }
        }
    }

    /// Stores `R` rows of 8 accumulators at `c` (row stride `ld`).
    #[inline(always)]
    unsafe fn finish<const R: usize>(acc: [[v128; 2]; R], c: *mut f32, ld: usize) {
        // SAFETY: the caller's block lies inside C.
        unsafe {
            for (r, row) in acc.iter().enumerate() {
                let dst = c.add(r * ld);
                v128_store(dst as *mut v128, row[0]);
                v128_store(dst.add(4) as *mut v128, row[1]);
            }
        }
    }

    /// `4 × 8` of `C` over `k` steps; `ld` is the row stride of `B` and `C`. Written out so
    /// that the eight accumulators stay in V8's registers (a loop over an array of them
    /// does not).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block4(a: *const f32, rs: usize, cs: usize, b: *const f32, ld: usize, c: *mut f32, k: usize, init: Init) {
        // SAFETY: the caller keeps 4 rows, 8 columns and k steps inside the operands.
        unsafe {
            let [[mut c00, mut c01], [mut c10, mut c11], [mut c20, mut c21], [mut c30, mut c31]] =
                start::<4>(init, c, ld);
            let (mut a0, mut a1, mut a2, mut a3) = (a, a.add(rs), a.add(2 * rs), a.add(3 * rs));
            let mut brow = b;
            for _ in 0..k {
                let b0 = v128_load(brow as *const v128);
                let b1 = v128_load(brow.add(4) as *const v128);
                let x0 = v128_load32_splat(a0 as *const u32);
                c00 = madd(x0, b0, c00);
                c01 = madd(x0, b1, c01);
                let x1 = v128_load32_splat(a1 as *const u32);
                c10 = madd(x1, b0, c10);
                c11 = madd(x1, b1, c11);
                let x2 = v128_load32_splat(a2 as *const u32);
                c20 = madd(x2, b0, c20);
                c21 = madd(x2, b1, c21);
                let x3 = v128_load32_splat(a3 as *const u32);
                c30 = madd(x3, b0, c30);
                c31 = madd(x3, b1, c31);
                (a0, a1, a2, a3) = (a0.add(cs), a1.add(cs), a2.add(cs), a3.add(cs));
                brow = brow.add(ld);
            }
            finish([[c00, c01], [c10, c11], [c20, c21], [c30, c31]], c, ld);
        }
    }

    /// `1 × 8` of `C` over `k` steps (the rows after the last block of four).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block1(a: *const f32, cs: usize, b: *const f32, ld: usize, c: *mut f32, k: usize, init: Init) {
        // SAFETY: the caller keeps 1 row, 8 columns and k steps inside the operands.
        unsafe {
            let [[mut lo, mut hi]] = start::<1>(init, c, ld);
            let (mut ap, mut brow) = (a, b);
            for _ in 0..k {
                let x = v128_load32_splat(ap as *const u32);
                lo = madd(x, v128_load(brow as *const v128), lo);
                hi = madd(x, v128_load(brow.add(4) as *const v128), hi);
                ap = ap.add(cs);
                brow = brow.add(ld);
            }
            finish([[lo, hi]], c, ld);
        }
    }
}

/// Columns `from..n` of one output row, scalar (the tail the AVX2 kernel leaves).
///
/// # Safety
/// `arow` must point at `k` values, `b` at `k*n`, `crow` at `n`.
#[cfg(target_arch = "x86_64")]
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

/// AVX-512 products with `A` addressed through strides (`A(i, p) = a[i*rs + p*cs]`), so one
/// kernel serves `a @ b` (rs = k, cs = 1) and `aᵀ @ b` for a stored `[k, m]` (rs = 1, cs = m).
///
/// `C` is cut into blocks of up to 6 rows × 4 vectors of 16 columns (24 accumulators in
/// registers); per step `p` each block loads its strip of row `p` of `B` once and
/// multiplies it by six broadcast `A(i, p)`, which the compiler folds into the FMAs as
/// embedded broadcasts. The strips of a row are balanced (80 columns → 48 + 32 rather than
/// 64 + 16) and the last vector of a strip is masked, so no column is left to a scalar
/// tail. A long `k` (a weight gradient sums over every node) is cut into panels of
/// [`KC`] rows of `B` that stay in L1 while every block of rows passes over them.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{Init, Problem};
    use std::arch::x86_64::*;

    const MR: usize = 6;
    const MAX_NV: usize = 4;
    /// Rows of `B` per panel: 128 × 80 floats = 40 KiB, inside a 48 KiB L1.
    const KC: usize = 128;

    /// # Safety
    /// The CPU has AVX-512F; `p` was made by [`Problem::new`] from live operands.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gemm(p: Problem) {
        let Problem { a, rs, cs, b, bias, addend, c, m, k, n, .. } = p;
        if m == 0 || n == 0 {
            return;
        }
        let vecs = n.div_ceil(16);
        let strips = vecs.div_ceil(MAX_NV);
        let panels = k.div_ceil(KC).max(1);
        for q in 0..panels {
            let (p0, kc) = (q * KC, KC.min(k.saturating_sub(q * KC)));
            let mut i = 0;
            while i < m {
                let rows = MR.min(m - i);
                let (mut col, mut v_done) = (0, 0);
                for s in 0..strips {
                    // vectors in this strip: an even share of what is left
                    let nv = (vecs - v_done).div_ceil(strips - s);
                    let width = (nv * 16).min(n - col);
                    let last = width - (nv - 1) * 16; // 1..=16 columns in the last vector
                    let mask: __mmask16 = if last == 16 { 0xFFFF } else { ((1u32 << last) - 1) as u16 };
                    // SAFETY: rows i..i+rows ≤ m, columns col..col+width ≤ n and steps
                    // p0..p0+kc ≤ k, inside the operands (the caller's contract).
                    unsafe {
                        let ab = a.add(i * rs + p0 * cs);
                        let (bb, cb) = (b.add(p0 * n + col), c.add(i * n + col));
                        // the first panel starts from the bias (or zero), the others add to C
                        let init = Init::for_block(bias, addend, p0, i, col, n);
                        let t = Tile { a: ab, rs, cs, b: bb, c: cb, ld: n, k: kc, mask, init };
                        macro_rules! go {
                            ($($r:literal),*; $vs:tt) => {
                                match rows { $($r => go!(@v $r $vs),)* _ => unreachable!() }
                            };
                            (@v $r:literal [$($v:literal),*]) => {
                                match nv { $($v => block::<$r, $v>(&t),)* _ => unreachable!() }
                            };
                        }
                        go!(1, 2, 3, 4, 5, 6; [1, 2, 3, 4]);
                    }
                    col += width;
                    v_done += nv;
                }
                if q + 1 == panels {
                    // SAFETY: rows i..i+rows ≤ m, every column written by the strips above.
                    unsafe { p.finish_rows(i..i + rows) };
                }
                i += rows;
            }
        }
    }

    /// One block of `C`: `c` and `b` point at its first column, `a` at `A(first row, first
    /// step)`; `ld` is the row stride of `B` and `C`; `mask` selects the columns of the last
    /// vector.
    struct Tile {
        a: *const f32,
        rs: usize,
        cs: usize,
        b: *const f32,
        c: *mut f32,
        ld: usize,
        k: usize,
        mask: __mmask16,
        init: Init,
    }

    /// `R × NV·16` of `C` (last vector masked) over `t.k` steps.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn block<const R: usize, const NV: usize>(t: &Tile) {
        // SAFETY: the caller keeps rows < R, columns < (NV-1)*16 + popcount(mask) and
        // steps < k inside the operands; masked lanes are neither read nor written.
        unsafe {
            let load = |p: *const f32, v: usize| {
                if v + 1 == NV {
                    _mm512_maskz_loadu_ps(t.mask, p.add(v * 16))
                } else {
                    _mm512_loadu_ps(p.add(v * 16))
                }
            };
            let mut acc = [[_mm512_setzero_ps(); NV]; R];
            match t.init {
                Init::Fresh { bias, addend } => {
                    for v in 0..NV {
                        let b = bias.map(|p| load(p, v));
                        for (r, row) in acc.iter_mut().enumerate() {
                            let a = addend.map(|p| load(p.add(r * t.ld), v));
                            row[v] = match (a, b) {
                                (Some(a), Some(b)) => _mm512_add_ps(a, b),
                                (Some(x), None) | (None, Some(x)) => x,
                                (None, None) => row[v],
                            };
                        }
                    }
                }
                Init::Accumulate => {
                    for (r, row) in acc.iter_mut().enumerate() {
                        for (v, x) in row.iter_mut().enumerate() {
                            *x = load(t.c.add(r * t.ld), v);
                        }
                    }
                }
            }
            let mut ap = [t.a; R];
            for (r, p) in ap.iter_mut().enumerate() {
                *p = t.a.add(r * t.rs);
            }
            let mut brow = t.b;
            for _ in 0..t.k {
                let mut bv = [_mm512_setzero_ps(); NV];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = load(brow, v);
                }
                for r in 0..R {
                    let x = _mm512_set1_ps(*ap[r]);
                    for v in 0..NV {
                        acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
                    }
                    ap[r] = ap[r].add(t.cs);
                }
                brow = brow.add(t.ld);
            }
            for (r, row) in acc.iter().enumerate() {
                let out = t.c.add(r * t.ld);
                for (v, &x) in row.iter().enumerate() {
                    if v + 1 == NV {
                        _mm512_mask_storeu_ps(out.add(v * 16), t.mask, x);
                    } else {
                        _mm512_storeu_ps(out.add(v * 16), x);
                    }
                }
            }
        }
    }
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

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::rng::Rng;

    const SHAPES: &[(usize, usize, usize)] =
        &[(1, 1, 16), (7, 5, 17), (13, 80, 80), (4, 3, 32), (33, 17, 41), (2000, 80, 80), (80, 300, 80), (9, 129, 3)];

    fn operands(rng: &mut Rng, m: usize, k: usize, n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let mut v = |len: usize| (0..len).map(|_| rng.uniform_range(-1.0, 1.0)).collect::<Vec<f32>>();
        (v(m * k), v(k * n), v(n))
    }

    fn check(got: &[f32], m: usize, n: usize, want: impl Fn(usize, usize) -> f32, what: &str) {
        for i in 0..m {
            for j in 0..n {
                let w = want(i, j);
                assert!((got[i * n + j] - w).abs() < 1e-4, "{what} [{i},{j}]: {} vs {w}", got[i * n + j]);
            }
        }
    }

    #[test]
    fn avx2_kernel_matches_a_plain_loop_with_row_and_column_tails() {
        let mut rng = Rng::new(4);
        for &(m, k, n) in SHAPES {
            let (a, b, _) = operands(&mut rng, m, k, n);
            let mut c = vec![f32::NAN; m * n];
            if !gemm_nn_x86(&a, &b, &mut c, m, k, n) {
                return; // no AVX2/FMA here: matrixmultiply is used instead
            }
            check(&c, m, n, |i, j| (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum(), &format!("avx2 {m}x{k}x{n}"));
        }
    }

    /// Plain and transposed `A`, each with every start (zero, bias, addend, both); k over
    /// one panel (129, 300) exercises the accumulation across panels; n of 3, 17, 41 the
    /// masked last vector.
    #[test]
    fn avx512_kernel_matches_a_plain_loop_in_every_layout() {
        let mut rng = Rng::new(5);
        for &(m, k, n) in SHAPES {
            let (a, b, bias) = operands(&mut rng, m, k, n);
            let addend: Vec<f32> = (0..m * n).map(|_| rng.uniform_range(-1.0, 1.0)).collect();
            let at = crate::kernels::shape_ops::transpose_last2(&a, m, k); // [k, m]
            for transposed in [false, true] {
                for (with_bias, with_addend) in [(false, false), (true, false), (false, true), (true, true)] {
                    let mut c = vec![std::mem::MaybeUninit::new(f32::NAN); m * n];
                    let src = if transposed { &at } else { &a };
                    let start =
                        Start { bias: with_bias.then_some(&bias[..]), addend: with_addend.then_some(&addend[..]) };
                    if !gemm_strided(src, transposed, &b, start, &mut c, m, k, n, false) {
                        return; // no AVX-512 here: the AVX2 kernel or matrixmultiply is used instead
                    }
                    // SAFETY: gemm_strided wrote every entry (they started as NaN anyway).
                    let got: Vec<f32> = c.iter().map(|v| unsafe { v.assume_init() }).collect();
                    let want = |i: usize, j: usize| {
                        (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum::<f32>()
                            + if with_bias { bias[j] } else { 0.0 }
                            + if with_addend { addend[i * n + j] } else { 0.0 }
                    };
                    let what =
                        format!("avx512 {m}x{k}x{n} transposed={transposed} bias={with_bias} addend={with_addend}");
                    check(&got, m, n, want, &what);
                }
            }
        }
    }
}
