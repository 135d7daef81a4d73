//! The wasm dense products (kernels::gemm_simd) against a plain triple loop, in headless
//! Chromium: MatMul, MatMulTN, Linear with a bias and LinearAdd (bias and addend), on shapes
//! with row and column tails
//! and with a k longer than one panel. scripts/test.sh runs this file twice: with the plain
//! simd128 build and with relaxed SIMD (fused multiply-adds, the build the page loads),
//! setting EXPECT_RELAXED_SIMD=1 for the second so that a build that silently lost the
//! feature fails here.
#![cfg(target_arch = "wasm32")]

use ipu_playground::ir::Op;
use ipu_playground::kernels::eval;
use ipu_playground::rng::Rng;
use ipu_playground::tensor::Tensor;
use wasm_bindgen_test::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn built_with_the_expected_simd() {
    let expected = option_env!("EXPECT_RELAXED_SIMD") == Some("1");
    assert_eq!(cfg!(target_feature = "relaxed-simd"), expected, "relaxed-simd in this build");
    const { assert!(cfg!(target_feature = "simd128"), "built without simd128") };
}

#[wasm_bindgen_test]
fn products_match_a_plain_loop() {
    let mut rng = Rng::new(9);
    let shapes = [(1, 1, 1), (7, 5, 9), (13, 80, 80), (4, 3, 8), (33, 17, 21), (9, 300, 19), (130, 129, 24)];
    for &(m, k, n) in &shapes {
        let mut vals = |len: usize| (0..len).map(|_| rng.uniform_range(-1.0, 1.0)).collect::<Vec<f32>>();
        let (a, b, bias, addend) = (vals(m * k), vals(k * n), vals(n), vals(m * n));
        let want = |i: usize, j: usize| (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum::<f32>();
        let t = |shape: &[usize], v: Vec<f32>| Tensor::from_f32(shape, v).unwrap();
        let run = |op: Op, ins: &[&Tensor]| eval(&op, ins).unwrap()[0].to_f32_vec();
        let got = run(Op::MatMul, &[&t(&[m, k], a.clone()), &t(&[k, n], b.clone())]);
        // MatMulTN reads its left operand stored transposed, [k, m].
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let tn = run(Op::MatMulTN, &[&t(&[k, m], at), &t(&[k, n], b.clone())]);
        // Linear takes the weight as [n, k].
        let w: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let (ta, tw, tb) = (t(&[m, k], a.clone()), t(&[n, k], w), t(&[n], bias.clone()));
        let lin = run(Op::Linear { has_bias: true }, &[&ta, &tw, &tb]);
        let la = run(Op::LinearAdd { has_bias: true }, &[&ta, &tw, &tb, &t(&[m, n], addend.clone())]);
        let tol = 1e-5 * k as f32 + 1e-5;
        for i in 0..m {
            for (j, &bj) in bias.iter().enumerate() {
                let (w, x) = (want(i, j), i * n + j);
                assert!((got[x] - w).abs() < tol, "matmul {m}x{k}x{n} [{i},{j}]: {} vs {w}", got[x]);
                assert!((tn[x] - w).abs() < tol, "matmul_tn {m}x{k}x{n} [{i},{j}]: {} vs {w}", tn[x]);
                let wb = w + bj;
                assert!((lin[x] - wb).abs() < tol, "linear {m}x{k}x{n} [{i},{j}]: {} vs {wb}", lin[x]);
                let wa = wb + addend[x];
                assert!((la[x] - wa).abs() < tol, "linear_add {m}x{k}x{n} [{i},{j}]: {} vs {wa}", la[x]);
            }
        }
    }
}
