//! PyG's conventions, checked against PyG itself: every case of `tests/golden/pyg/convs.json`
//! (made by `tests/golden/make_pyg_golden.py` with PyTorch Geometric) builds the module, loads
//! PyG's parameters under PyG's own `state_dict` names, traces `module(x, edge_index)` as PyG
//! calls it (an int32 `[2, E]` edge_index with duplicate edges, self-loops and nodes that
//! receive nothing), differentiates `sum(out * grad_output)` and runs forward and backward
//! on the executor. The output and the gradient of `x` and of every parameter must match
//! PyG's within `1e-5 + 1e-4·|want|` (the goldens are float64 results rounded to float32).
//!
//! The same cases are then traced with the CSR adjacency the engine also takes
//! (`mean_adjacency` / `gcn_adjacency` of the same edges), which must agree too.

use ipu_playground::autograd::{training_graph, TrainOptions};
use ipu_playground::exec::{run, Store};
use ipu_playground::gnn::data::loader::{gcn_adjacency, mean_adjacency};
use ipu_playground::gnn::nn::{Aggregation, GCNConv, GroupAddRev, SAGEConv};
use ipu_playground::rng::Rng;
use ipu_playground::tensor::sparse::CsrMatrix;
use ipu_playground::tensor::{DType, Tensor};
use ipu_playground::trace::nn::{Arg, Module};
use ipu_playground::trace::{SparseVar, Tracer};
use serde_json::Value;
use std::rc::Rc;

fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let data = v["data"].as_array().unwrap();
    match v["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_f32(&shape, data.iter().map(|x| x.as_f64().unwrap() as f32).collect()).unwrap(),
        "int32" => Tensor::from_i32(&shape, data.iter().map(|x| x.as_i64().unwrap() as i32).collect()).unwrap(),
        d => panic!("dtype {d}"),
    }
}

fn close(what: &str, got: &[f32], want: &Tensor) {
    let want = want.to_f32_vec();
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-5 + 1e-4 * w.abs(), "{what}[{i}]: got {g}, PyG {w}");
    }
}

fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/pyg/convs.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

fn module(c: &Value) -> Box<dyn Module> {
    let a = &c["args"];
    let (cin, cout) = (a["in"].as_u64().unwrap() as usize, a["out"].as_u64().unwrap() as usize);
    let mut rng = Rng::new(0);
    let mut m: Box<dyn Module> = match c["module"].as_str().unwrap() {
        "SAGEConv" => {
            // PyG's `aggr` where the case gives one (its default, the mean, where not).
            let aggr = Aggregation::parse(a["aggr"].as_str().unwrap_or("mean")).unwrap();
            Box::new(SAGEConv::new(cin, cout, &mut rng).unwrap().with_aggr(aggr))
        }
        "GCNConv" => Box::new(GCNConv::new(cin, cout, &mut rng).unwrap()),
        "GroupAddRev" => {
            let groups =
                (0..a["num_groups"].as_u64().unwrap()).map(|_| SAGEConv::new(cin, cout, &mut rng).unwrap()).collect();
            Box::new(GroupAddRev::new(groups, false).unwrap())
        }
        m => panic!("module {m}"),
    };
    // PyG's names, as they are: a strict load.
    let ours: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    let mut theirs: Vec<String> = c["params"].as_object().unwrap().keys().cloned().collect();
    let mut sorted = ours.clone();
    sorted.sort();
    theirs.sort();
    assert_eq!(sorted, theirs, "{}: parameter names", c["name"]);
    for (name, v) in c["params"].as_object().unwrap() {
        m.set_parameter(name, tensor(v)).unwrap();
    }
    m
}

/// The graph argument of the trace: PyG's edge_index, or the CSR adjacency the engine builds
/// from the same edges for this module (rows are targets; for the sum, one per edge).
enum Graph {
    EdgeIndex,
    Csr,
}

fn check(c: &Value, graph: Graph) {
    let name = c["name"].as_str().unwrap();
    let m = module(c);
    let x = tensor(&c["x"]);
    let ei = tensor(&c["edge_index"]);
    let g = tensor(&c["grad_output"]);
    let (n, e) = (x.shape()[0], ei.shape()[1]);
    let tr = Tracer::new();
    let xv = tr.input("x", x.shape(), DType::Float32).unwrap();
    let mut inputs = vec![Rc::new(x.clone())];
    let adj = match graph {
        Graph::EdgeIndex => {
            inputs.push(Rc::new(ei.clone()));
            Arg::Dense(tr.input("edge_index", &[2, e], DType::Int32).unwrap())
        }
        Graph::Csr => {
            let idx: Vec<i32> = ei.as_i32().unwrap().iter().copied().collect();
            let (src, dst): (Vec<u32>, Vec<u32>) = (0..e).map(|k| (idx[k] as u32, idx[e + k] as u32)).unzip();
            let a = if c["module"] == "GCNConv" {
                gcn_adjacency(n, &src, &dst)
            } else if c["args"]["aggr"] == "sum" {
                // PyG's "sum" on an adj_t: the product with the edges' adjacency (one per
                // edge, a duplicate edge adding up).
                CsrMatrix::from_triplets(n, n, &dst, &src, &vec![1.0; e])
            } else {
                mean_adjacency(n, &src, &dst)
            };
            let s = SparseVar::input(&tr, "adj", n, n, a.nnz()).unwrap();
            inputs.extend(a.to_tensors(a.nnz()).unwrap().into_iter().map(Rc::new));
            Arg::Sparse(s)
        }
    };
    let gv = tr.input("grad_output", g.shape(), DType::Float32).unwrap();
    inputs.push(Rc::new(g));
    let out = m.forward_args(&tr, &[Arg::Dense(xv), adj]).unwrap();
    let loss = out.mul(&gv).unwrap().sum(&[], false).unwrap();
    let t = tr.finish(&[&loss, &out]).unwrap();
    let opts = TrainOptions { return_grads: true, input_grads: vec!["x".into()], ..Default::default() };
    let tg = training_graph(&t.graph, 0, &opts).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let r = run(&tg.graph, &mut store, &inputs).unwrap();
    close(&format!("{name}: out"), &r.outputs[1].to_f32_vec(), &tensor(&c["out"]));
    let grads = &c["grads"];
    let (_, xi) = &tg.input_grad_outputs[0];
    close(&format!("{name}: x.grad"), &r.outputs[*xi].to_f32_vec(), &tensor(&grads["x"]));
    assert_eq!(tg.grad_outputs.len(), c["params"].as_object().unwrap().len(), "{name}: every parameter has a gradient");
    for (p, i) in &tg.grad_outputs {
        close(&format!("{name}: {p}.grad"), &r.outputs[*i].to_f32_vec(), &tensor(&grads[p.as_str()]));
    }
}

#[test]
fn convs_called_with_edge_index_match_pyg() {
    let cases = cases();
    assert!(cases.len() >= 7);
    for c in &cases {
        check(c, Graph::EdgeIndex);
    }
}

#[test]
fn convs_called_with_the_csr_adjacency_of_the_same_edges_match_pyg() {
    for c in &cases() {
        check(c, Graph::Csr);
    }
}

#[test]
fn an_edge_index_of_the_wrong_type_or_range_names_it() {
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 3], DType::Float32).unwrap();
    let conv = SAGEConv::new(3, 2, &mut Rng::new(0)).unwrap();
    let three_rows = tr.input("edge_index", &[3, 5], DType::Int32).unwrap();
    let e = conv.forward_args(&tr, &[x.clone().into(), three_rows.into()]).unwrap_err().to_string();
    assert!(
        e.contains("edge_index an int32 [2, num_edges] tensor (sources, then targets), got edge_index i32[3,5]"),
        "{e}"
    );
    // An index past the nodes fails where it is read, naming the index.
    let tr = Tracer::new();
    let x = tr.input("x", &[4, 3], DType::Float32).unwrap();
    let ei = tr.input("ei", &[2, 2], DType::Int32).unwrap();
    let out = conv.forward_args(&tr, &[x.clone().into(), ei.into()]).unwrap();
    let t = tr.finish(&[&out]).unwrap();
    let mut store = Store::from_params(&t.params, &t.buffers, 0).unwrap();
    let inputs = [
        Rc::new(Tensor::zeros(&[4, 3], DType::Float32)),
        Rc::new(Tensor::from_i32(&[2, 2], vec![0, 9, 1, 2]).unwrap()),
    ];
    let e = run(&t.graph, &mut store, &inputs).unwrap_err().to_string();
    assert!(e.contains('9') && e.contains("out of range"), "{e}");
}
