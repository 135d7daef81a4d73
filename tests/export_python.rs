//! `export`: a wrapped model out as Python. The PopTorch form carries the plan's Blocks,
//! options, strategy and optimizer; both forms are valid Python (parsed by python3's `ast`
//! where python3 is on the machine); backward-only graphs are refused. The numerical check
//! against real PyTorch is `make check-export` (scripts/check-export.sh).

use ipu_playground::compile::{ExecutionStrategy, Options};
use ipu_playground::export::{reference::reference, to_python, weights, Target};
use ipu_playground::ir::Reduction;
use ipu_playground::poptorch::{inference_model, training_model, HostModel, Optimizer, OptimizerArgs, OptimizerType};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{call, BatchNorm2d, Linear};
use ipu_playground::trace::{Trace, Tracer};
use std::io::Write;
use std::process::{Command, Stdio};
use std::rc::Rc;

/// A classifier in three Blocks on three IPUs, with a dropout mask drawn in training.
fn pipelined(training: bool) -> Trace {
    let mut rng = Rng::new(3);
    let (l1, l2, l3) = (
        Linear::new(6, 8, true, &mut rng).unwrap(),
        Linear::new(8, 8, true, &mut rng).unwrap(),
        Linear::new(8, 4, false, &mut rng).unwrap(),
    );
    let tr = Tracer::new();
    tr.set_training(training);
    let x = tr.input("x", &[5, 6], DType::Float32).unwrap();
    let y = tr.input("labels", &[5], DType::Int32).unwrap();
    let h = tr.block("embed", Some(0), || call(&tr, "fc1", &l1, &x)?.relu()).unwrap();
    let h = tr
        .block("hidden", Some(1), || {
            let h = call(&tr, "fc2", &l2, &h)?.gelu()?;
            let h = if training { h.dropout_with_mask(&tr.random_mask(&[5, 8], 0.25)?, 0.25)? } else { h };
            h.recomputation_checkpoint()
        })
        .unwrap();
    let (logits, loss) = tr
        .block("head", Some(2), || {
            let logits = call(&tr, "head", &l3, &h)?;
            let loss = logits.cross_entropy(&y, None, Reduction::Mean, None)?;
            Ok((logits, loss))
        })
        .unwrap();
    tr.finish(&[&logits, &loss]).unwrap()
}

fn options() -> Options {
    let mut o = Options::new();
    o.auto_round_num_ipus(true).unwrap().device_iterations(2).unwrap();
    o.training.gradient_accumulation = 6;
    o
}

/// python3's `ast.parse` of `code`, when python3 is on the machine (`None` otherwise).
fn python_parse(code: &str) -> Option<Result<(), String>> {
    let mut child = Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(sys.stdin.read())"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(code.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    Some(if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) })
}

#[test]
fn poptorch_export_carries_blocks_options_strategy_and_optimizer() {
    let model = HostModel::new(&pipelined(true));
    let mut opts = options();
    opts.set_execution_strategy(ExecutionStrategy::parse("sharded").unwrap()).unwrap();
    let adam =
        Optimizer::new(OptimizerType::Adam, OptimizerArgs { lr: Some(0.002), ..OptimizerArgs::default() }).unwrap();
    let exec = training_model(&model, &mut opts, Some(adam)).unwrap();
    let py = to_python(&exec, Target::Poptorch, "model").unwrap();
    if std::env::var_os("EXPORT_DUMP").is_some() {
        std::fs::write("target/export_poptorch.py", &py).unwrap();
    }
    for want in [
        "import poptorch",
        "with poptorch.Block(\"embed\", ipu_id=0):",
        "with poptorch.Block(\"hidden\", ipu_id=1):",
        "with poptorch.Block(\"head\", ipu_id=2):",
        "= poptorch.recomputationCheckpoint(",
        "opts.deviceIterations(2)",
        "opts.autoRoundNumIPUs(True)",
        "opts.Training.gradientAccumulation(6)",
        "opts.setExecutionStrategy(poptorch.ShardedExecution())",
        "optimizer = poptorch.optim.Adam(model.parameters(), lr=0.002)\n",
        "wrapped = poptorch.trainingModel(model, opts, optimizer)",
        "COMBINED_BATCH_FACTOR = 12",
        "_module(self, \"fc1\", torch.nn.Linear(6, 8, bias=True, dtype=torch.float32))",
        "_module(self, \"head\", torch.nn.Linear(8, 4, bias=False, dtype=torch.float32))",
        "= self.fc1(x)",
        "self._random_mask((5, 8), 0.25, dev)",
    ] {
        assert!(py.contains(want), "missing {want:?} in\n{py}");
    }
    if let Some(r) = python_parse(&py) {
        r.unwrap_or_else(|e| panic!("not valid Python: {e}\n{py}"));
    }
}

#[test]
fn pytorch_export_has_no_poptorch_and_a_training_loop() {
    let model = HostModel::new(&pipelined(true));
    let exec = training_model(&model, &mut options(), None).unwrap();
    let py = to_python(&exec, Target::Pytorch, "model").unwrap();
    if std::env::var_os("EXPORT_DUMP").is_some() {
        std::fs::write("target/export_pytorch.py", &py).unwrap();
    }
    assert!(!py.contains("poptorch"), "{py}");
    for want in
        ["def train(model, steps", "torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0", "loss.backward()"]
    {
        assert!(py.contains(want), "missing {want:?} in\n{py}");
    }
    if let Some(r) = python_parse(&py) {
        r.unwrap_or_else(|e| panic!("not valid Python: {e}\n{py}"));
    }
}

#[test]
fn inference_export_and_weights_under_state_dict_names() {
    let model = HostModel::new(&pipelined(false));
    let exec = inference_model(&model, &mut Options::new()).unwrap();
    let py = to_python(&exec, Target::Pytorch, "net").unwrap();
    assert!(py.contains("net.safetensors") && !py.contains("def train("), "{py}");
    let bytes = weights(&model).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    for name in ["fc1.weight", "fc1.bias", "fc2.weight", "head.weight"] {
        assert!(header.contains(&format!("\"{name}\"")), "{name} not in {header}");
    }
}

#[test]
fn reference_step_returns_outputs_loss_gradients_and_masks() {
    let model = HostModel::new(&pipelined(true));
    let x = Rc::new(Tensor::from_f32(&[5, 6], (0..30).map(|i| (i as f32 * 0.37).sin()).collect()).unwrap());
    let y = Rc::new(Tensor::from_i32(&[5], vec![0, 1, 2, 3, 1]).unwrap());
    let r = reference(&model, true, &[x, y], 7).unwrap();
    assert_eq!(r.outputs.len(), 2);
    assert_eq!(r.loss_output, Some(1));
    assert_eq!(r.masks.len(), 1);
    assert_eq!(r.masks[0].shape(), &[5, 8]);
    let names: Vec<&str> = r.gradients.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "head.weight"]);
}

#[test]
fn an_untraced_model_is_an_export_error() {
    let model = HostModel::untraced(Vec::new(), Vec::new());
    let exec = inference_model(&model, &mut Options::new()).unwrap();
    let e = to_python(&exec, Target::Poptorch, "m").unwrap_err();
    assert_eq!(e.kind().as_str(), "export");
    assert!(e.to_string().contains("not been traced"), "{e}");
}

#[test]
fn a_training_graph_is_refused_only_forward_graphs_are_exported() {
    use ipu_playground::autograd::{find_loss, training_graph_at, TrainOptions};
    use ipu_playground::export::python::forward;
    let trace = pipelined(false);
    let fwd = &trace.graph;
    let loss = find_loss(fwd).unwrap();
    assert!(forward(fwd, Some(loss), false, &Default::default(), &Default::default()).is_ok());
    let tg = training_graph_at(fwd, loss, &TrainOptions { return_grads: true, ..TrainOptions::default() }).unwrap();
    let e = forward(&tg.graph, Some(loss), false, &Default::default(), &Default::default()).unwrap_err();
    assert_eq!(e.kind().as_str(), "export");
    assert!(e.to_string().contains("only a forward graph is exported"), "{e}");
}

/// A batch norm in training as PyTorch users write it: an `nn.BatchNorm2d` module called on
/// the activations, its running statistics the module's buffers, updated by the module (what
/// the page's Python traces back into the same `batch_norm` and updates). On a 2-d input (a
/// BatchNorm1d's) it stays the functional helper.
#[test]
fn a_batch_norm_is_exported_as_its_module() {
    let trace = |shape: &[usize]| {
        let bn = BatchNorm2d::new(4, 1e-5, Some(0.25), true, true).unwrap();
        let tr = Tracer::new();
        tr.set_training(true);
        let x = tr.input("x", shape, DType::Float32).unwrap();
        let y = call(&tr, "body.bn", &bn, &x).unwrap().relu().unwrap();
        let loss = y.sum(&[], false).unwrap().identity_loss(Reduction::Sum).unwrap();
        tr.finish(&[&y, &loss]).unwrap()
    };
    let sgd =
        || Optimizer::new(OptimizerType::Sgd, OptimizerArgs { lr: Some(0.1), ..OptimizerArgs::default() }).unwrap();
    for target in [Target::Poptorch, Target::Pytorch] {
        let model = HostModel::new(&trace(&[2, 4, 3, 3]));
        let exec = training_model(&model, &mut Options::new(), Some(sgd())).unwrap();
        let py = to_python(&exec, target, "m").unwrap();
        let body = &py[py.find("def forward").unwrap()..];
        for want in [
            "_module(self, \"body.bn\", torch.nn.BatchNorm2d(4, eps=1e-5, momentum=0.25, affine=True, \
             track_running_stats=True, dtype=torch.float32))",
            "= self.body.bn(x)\n",
            ", dim=None, keepdim=False)",
        ] {
            assert!(py.contains(want), "missing {want:?} in\n{py}");
        }
        for unwanted in ["_batch_norm_train(x", "running_mean", "num_batches_tracked", "_buffer(self"] {
            assert!(
                !body.contains(unwanted) && !py[..py.find("def forward").unwrap()].contains(&format!("{unwanted}\"")),
                "{unwanted:?} in\n{py}"
            );
        }
        if let Some(r) = python_parse(&py) {
            r.unwrap_or_else(|e| panic!("not valid Python: {e}\n{py}"));
        }
    }
    let model = HostModel::new(&trace(&[2, 4]));
    let exec = training_model(&model, &mut Options::new(), Some(sgd())).unwrap();
    let py = to_python(&exec, Target::Pytorch, "m").unwrap();
    assert!(py.contains("_batch_norm_train(x, self.body.bn.weight, self.body.bn.bias, 1e-5)"), "{py}");
    assert!(!py.contains("torch.nn.BatchNorm2d"), "{py}");
}

/// What the page's Python traces back into the same graph (tests/node/export-roundtrip):
/// a constant as nested lists (no reshape after it), a cast to the dtype a value has as a
/// copy (`to` alone is the value itself), and a parameter the trace read before other ops
/// read where the trace read it (an inline `self.w` would be read after them).
#[test]
fn the_export_keeps_the_traced_order_and_ops() {
    let tr = Tracer::new();
    let x = tr.input("x", &[2, 2], DType::Float32).unwrap();
    let w = tr.param("w", Tensor::from_f32(&[2, 2], vec![0.5; 4]).unwrap()).unwrap();
    let c = tr.constant(Tensor::from_f32(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
    let y = x.cast(DType::Float32).unwrap().add(&c).unwrap().matmul(&w).unwrap();
    let t = tr.finish(&[&y]).unwrap();
    let model = HostModel::new(&t);
    let exec = inference_model(&model, &mut Options::new()).unwrap();
    let py = to_python(&exec, Target::Poptorch, "m").unwrap();
    for want in [
        "torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float32, device=dev)\n",
        "x.to(torch.float32, copy=True)",
        "        w = self.w\n",
    ] {
        assert!(py.contains(want), "missing {want:?} in\n{py}");
    }
    let body = &py[py.find("def forward").unwrap()..];
    assert!(body.find("w = self.w").unwrap() < body.find("copy=True").unwrap(), "{body}");
    assert!(!body.contains(".reshape("), "{body}");
}

/// PopTorch makes the attributes passed to an optimizer variable, and only its attributes:
/// LAMB's `bias_correction` is a setting, never marked.
#[test]
fn lamb_settings_are_not_marked_as_attributes() {
    let model = HostModel::new(&pipelined(true));
    let lamb = Optimizer::new(
        OptimizerType::Lamb,
        OptimizerArgs { lr: Some(0.006), bias_correction: Some(false), ..OptimizerArgs::default() },
    )
    .unwrap();
    let exec = training_model(&model, &mut options(), Some(lamb)).unwrap();
    let py = to_python(&exec, Target::Poptorch, "model").unwrap();
    assert!(py.contains("bias_correction=False"), "{py}");
    assert!(!py.contains("markAsConstant(\"bias_correction\")"), "{py}");
}

/// An int32 fill of a number that is not finite is recorded as the int32 the fill makes of
/// it, so the export writes back the same `full` (torch.full refuses NaN for an int32; the
/// page's Python traced 0 back where the graph held NaN, ROUNDTRIP_SEED=11's random model 13).
#[test]
fn an_int32_fill_of_a_non_finite_number_is_the_int32_it_makes() {
    let tr = Tracer::new();
    let x = tr.input("x", &[2], DType::Int32).unwrap();
    let nan = tr.full(&[], DType::Int32, f64::NAN).unwrap();
    let inf = tr.full(&[], DType::Int32, f64::NEG_INFINITY).unwrap();
    let half = tr.full(&[], DType::Int32, 2.5).unwrap();
    // (`scale`, the package's `x * number`, records its number the same way.)
    let y = x.add(&nan).unwrap().add(&inf).unwrap().add(&half).unwrap().scale(f64::NAN).unwrap();
    let t = tr.finish(&[&y]).unwrap();
    let fills: Vec<f64> = t
        .graph
        .nodes
        .iter()
        .filter_map(|n| match n.op {
            ipu_playground::ir::Op::Full { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    // (A fraction stays: torch.full truncates it as the engine does.)
    assert_eq!(fills, vec![0.0, f64::from(i32::MIN), 2.5, 0.0]);
    let model = HostModel::new(&t);
    let exec = inference_model(&model, &mut Options::new()).unwrap();
    let py = to_python(&exec, Target::Pytorch, "m").unwrap();
    assert!(py.contains("torch.full((), 0, dtype=torch.int32, device=dev)"), "{py}");
    assert!(py.contains(&format!("torch.full((), {}, dtype=torch.int32, device=dev)", i32::MIN)), "{py}");
}

/// PyG's RevGNN (3 groups, 2 layers, sparse features and adjacency): each invertible region
/// is written as `torch_geometric.nn.GroupAddRev` over one block class made from the first
/// group (a LayerNorm, the shared-mask dropout, a SAGEConv with `aggr="sum"` on the CSR
/// adjacency), `lin1` on the sparse features as the module's call, the masked loss and the
/// dropout as the helpers the page's Python traces back; with `disable` (no region) the
/// layers stay inlined. (Under real PyG: `make check-export`'s revgnn case; traced back by the
/// page's Python: tests/node/export-roundtrip.test.mjs.)
#[test]
fn a_revgnn_is_exported_as_pyg_group_add_rev_over_a_block_module() {
    use ipu_playground::gnn::nn::{RevGnn, RevGnnConfig};
    use ipu_playground::trace::SparseVar;
    let trace = |disable_rev: bool| {
        let cfg = RevGnnConfig {
            in_channels: 10,
            hidden: 12,
            out_channels: 3,
            num_layers: 2,
            num_groups: 3,
            dropout: 0.25,
            disable_rev,
        };
        let model = RevGnn::new(cfg, &mut Rng::new(5)).unwrap();
        let tr = Tracer::new();
        tr.set_training(true);
        let x = SparseVar::input(&tr, "x", 7, 10, 20).unwrap();
        let adj = SparseVar::input(&tr, "adj", 7, 7, 15).unwrap();
        let y = tr.input("y", &[7], DType::Int32).unwrap();
        let mask = tr.input("train_mask", &[7], DType::Bool).unwrap();
        let logits = model.forward(&tr, &x, &adj).unwrap();
        let loss = logits.cross_entropy(&y, Some(&mask), Reduction::Mean, None).unwrap();
        tr.finish(&[&logits, &loss]).unwrap()
    };
    let adam =
        || Optimizer::new(OptimizerType::Adam, OptimizerArgs { lr: Some(0.01), ..OptimizerArgs::default() }).unwrap();
    for target in [Target::Poptorch, Target::Pytorch] {
        let model = HostModel::new(&trace(false));
        let exec = training_model(&model, &mut Options::new(), Some(adam())).unwrap();
        let py = to_python(&exec, target, "m").unwrap();
        for want in [
            "import torch_geometric.nn\n",
            "class Block0(torch.nn.Module):",
            "_module(self, \"norm\", torch.nn.LayerNorm((4,), eps=1e-5, dtype=torch.float32))",
            "_module(self, \"conv\", torch_geometric.nn.SAGEConv(4, 4, aggr=\"sum\"))",
            "    def forward(self, x, adj, mask):\n",
            " = _dropout_with_mask(",
            " = self.conv(",
            "_module(self, \"convs.0\", torch_geometric.nn.GroupAddRev(Block0(), num_groups=3))",
            "_module(self, \"convs.1\", torch_geometric.nn.GroupAddRev(Block0(), num_groups=3))",
            "_module(self, \"lin1\", torch.nn.Linear(10, 12, bias=True, dtype=torch.float32))",
            " = self.lin1(x)\n",
            " = self.get_submodule(\"convs.0\")(",
            " = _masked_cross_entropy(",
        ] {
            assert!(py.contains(want), "missing {want:?} in\n{py}");
        }
        assert!(!py.contains("class Block1"), "one class for the blocks written the same:\n{py}");
        assert!(!py.contains("# region"), "a region inlined:\n{py}");
        if let Some(r) = python_parse(&py) {
            r.unwrap_or_else(|e| panic!("not valid Python: {e}\n{py}"));
        }
    }
    // Disabled: no region, the plain layers (each group's modules where the trace had them).
    let model = HostModel::new(&trace(true));
    let exec = training_model(&model, &mut Options::new(), Some(adam())).unwrap();
    let py = to_python(&exec, Target::Pytorch, "m").unwrap();
    assert!(!py.contains("GroupAddRev("), "{py}");
    assert!(
        py.contains("_module(self, \"convs.0.convs.2.conv\", torch_geometric.nn.SAGEConv(4, 4, aggr=\"sum\"))"),
        "{py}"
    );
}
