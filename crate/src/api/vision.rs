//! The convolutional layers as JS classes (`nn.Conv2d`, `nn.BatchNorm2d`, `nn.MaxPool2d`,
//! `nn.AvgPool2d`, `nn.AdaptiveAvgPool2d`, `nn.Flatten`), each a `rust_module!` over the
//! core's module; their 2-D arguments are read in `geometry.rs`.
//!
//! Arguments follow PyTorch's, the optional ones in an options object with camelCase names:
//! `new nn.Conv2d(3, 64, 7, { stride: 2, padding: 3, bias: false })`,
//! `new nn.MaxPool2d(3, { stride: 2, padding: 1 })`, `new nn.BatchNorm2d(64, { momentum: 0.1 })`.
//! A size is a whole number `n` (`[n, n]`) or a pair `[h, w]`.

use super::args::{self, js_err, JsResult};
use super::geometry::{self, conv_geom, pair, pool_geom};
use super::modules::{rust_module, with_rng, FreshCopy};
use crate::trace::check::MAX_RANK;
use crate::trace::nn as rnn;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;

rust_module!(Conv2d, rnn::Conv2d, "x [N, C, H, W]", x);
rust_module!(BatchNorm2d, rnn::BatchNorm2d, "x [N, C, …]", x);
rust_module!(MaxPool2d, rnn::MaxPool2d, "x [N, C, H, W]", x);
rust_module!(AvgPool2d, rnn::AvgPool2d, "x [N, C, H, W]", x);
rust_module!(AdaptiveAvgPool2d, rnn::AdaptiveAvgPool2d, "x [N, C, H, W]", x);
rust_module!(Flatten, rnn::Flatten, "x", x);

#[wasm_bindgen]
impl Conv2d {
    /// `Conv2d(inChannels, outChannels, kernelSize, { stride = 1, padding = 0, dilation = 1,
    /// groups = 1, bias = true })`, NCHW, initialised as PyTorch (kaiming_uniform(a=√5)).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] in_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] out_channels: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel_size: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ stride?: number | [number, number]; padding?: number | [number, number] | \"valid\" | \"same\"; dilation?: number | [number, number]; groups?: number; bias?: boolean }"
        )]
        options: JsValue,
    ) -> JsResult<Conv2d> {
        let i = args::positive_size(&in_channels, "Conv2d: inChannels")?;
        let o = args::positive_size(&out_channels, "Conv2d: outChannels")?;
        let k = pair(&kernel_size, "Conv2d: kernelSize", 1, None)?;
        let opts = geometry::options(&options, "Conv2d: options")?;
        let (g, after) = conv_geom(&opts, "Conv2d", k)?;
        let bias = args::opt_bool(&args::get(&opts, "bias")?, "Conv2d: bias", true)?;
        let mut m = with_rng(|r| rnn::Conv2d::new(i, o, k, g.stride, g.padding, g.dilation, g.groups, bias, r))?;
        m.pad_after = after;
        Ok(Conv2d { inner: RefCell::new(m) })
    }
}

impl FreshCopy for rnn::Conv2d {
    fn fresh_copy(&self) -> JsResult<Self> {
        let g = self.geom;
        let mut copy = with_rng(|r| {
            rnn::Conv2d::new(
                self.in_channels,
                self.out_channels,
                self.kernel_size,
                g.stride,
                g.padding,
                g.dilation,
                g.groups,
                self.bias.is_some(),
                r,
            )
        })?;
        copy.pad_after = self.pad_after;
        Ok(copy)
    }
}

#[wasm_bindgen]
impl BatchNorm2d {
    /// `BatchNorm2d(numFeatures, { eps = 1e-5, momentum = 0.1 (null: cumulative average),
    /// affine = true, trackRunningStats = true })`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number")] num_features: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ eps?: number; momentum?: number | null; affine?: boolean; trackRunningStats?: boolean }"
        )]
        options: JsValue,
    ) -> JsResult<BatchNorm2d> {
        let c = args::positive_size(&num_features, "BatchNorm2d: numFeatures")?;
        let o = geometry::options(&options, "BatchNorm2d: options")?;
        let eps = args::get(&o, "eps")?;
        let eps = if eps.is_undefined() { 1e-5 } else { args::number(&eps, "BatchNorm2d: eps")? as f32 };
        let m = args::get(&o, "momentum")?;
        let momentum = match m {
            m if m.is_undefined() => Some(0.1),
            m if m.is_null() => None,
            m => Some(args::number(&m, "BatchNorm2d: momentum")? as f32),
        };
        let affine = args::opt_bool(&args::get(&o, "affine")?, "BatchNorm2d: affine", true)?;
        let track = args::opt_bool(&args::get(&o, "trackRunningStats")?, "BatchNorm2d: trackRunningStats", true)?;
        let m =
            rnn::BatchNorm2d::new(c, eps, momentum, affine, track).map_err(|e| args::range_error(&e.to_string()))?;
        Ok(BatchNorm2d { inner: RefCell::new(m) })
    }
}

impl FreshCopy for rnn::BatchNorm2d {
    fn fresh_copy(&self) -> JsResult<Self> {
        let track = self.running_mean.is_some();
        rnn::BatchNorm2d::new(self.num_features, self.eps, self.momentum, self.weight.is_some(), track).map_err(js_err)
    }
}

#[wasm_bindgen]
impl MaxPool2d {
    /// `MaxPool2d(kernelSize, { stride = kernelSize, padding = 0, dilation = 1,
    /// ceilMode = false })`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel_size: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ stride?: number | [number, number]; padding?: number | [number, number]; dilation?: number | [number, number]; ceilMode?: boolean }"
        )]
        options: JsValue,
    ) -> JsResult<MaxPool2d> {
        let geom = pool_geom(&kernel_size, &options, "MaxPool2d", true)?;
        Ok(MaxPool2d { inner: RefCell::new(rnn::MaxPool2d { geom }) })
    }
}

#[wasm_bindgen]
impl AvgPool2d {
    /// `AvgPool2d(kernelSize, { stride = kernelSize, padding = 0, ceilMode = false,
    /// countIncludePad = true })`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] kernel_size: JsValue,
        #[wasm_bindgen(
            unchecked_optional_param_type = "{ stride?: number | [number, number]; padding?: number | [number, number]; ceilMode?: boolean; countIncludePad?: boolean }"
        )]
        options: JsValue,
    ) -> JsResult<AvgPool2d> {
        let geom = pool_geom(&kernel_size, &options, "AvgPool2d", false)?;
        let o = geometry::options(&options, "AvgPool2d: options")?;
        let cip = args::opt_bool(&args::get(&o, "countIncludePad")?, "AvgPool2d: countIncludePad", true)?;
        Ok(AvgPool2d { inner: RefCell::new(rnn::AvgPool2d { geom, count_include_pad: cip }) })
    }
}

#[wasm_bindgen]
impl AdaptiveAvgPool2d {
    /// `AdaptiveAvgPool2d(outputSize)`: a whole number or `[h, w]`, from 1.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "number | [number, number]")] output_size: JsValue,
    ) -> JsResult<AdaptiveAvgPool2d> {
        let output = pair(&output_size, "AdaptiveAvgPool2d: outputSize", 1, None)?;
        Ok(AdaptiveAvgPool2d { inner: RefCell::new(rnn::AdaptiveAvgPool2d { output }) })
    }
}

#[wasm_bindgen]
impl Flatten {
    /// `Flatten(startDim = 1, endDim = -1)`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_optional_param_type = "number")] start_dim: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "number")] end_dim: JsValue,
    ) -> JsResult<Flatten> {
        let dim = |v: &JsValue, what: &str, d: isize| -> JsResult<isize> {
            if args::is_absent(v) {
                return Ok(d);
            }
            args::integer(v, what, -(MAX_RANK as i64), MAX_RANK as i64 - 1).map(|d| d as isize)
        };
        let start_dim = dim(&start_dim, "Flatten: startDim", 1)?;
        let end_dim = dim(&end_dim, "Flatten: endDim", -1)?;
        Ok(Flatten { inner: RefCell::new(rnn::Flatten { start_dim, end_dim }) })
    }
}

macro_rules! same_copy {
    ($($t:ident { $($f:ident),* }),*) => {
        $(impl FreshCopy for rnn::$t {
            fn fresh_copy(&self) -> JsResult<Self> {
                Ok(rnn::$t { $($f: self.$f),* })
            }
        })*
    };
}
same_copy!(
    MaxPool2d { geom },
    AvgPool2d { geom, count_include_pad },
    AdaptiveAvgPool2d { output },
    Flatten { start_dim, end_dim }
);
