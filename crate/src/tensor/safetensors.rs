//! Writes (and [`read`]s) tensors in the safetensors format (huggingface/safetensors), which PyTorch loads
//! with `safetensors.torch.load_file` and which holds nothing executable:
//!
//! ```text
//! [8 bytes: N, u64 little-endian][N bytes: JSON header][tensor bytes]
//! header = { "<name>": { "dtype": "F32", "shape": [..], "data_offsets": [begin, end] }, …,
//!            "__metadata__": { "<key>": "<string>", … } }
//! ```
//!
//! Offsets count from the first byte after the header; the tensors' bytes are row-major,
//! little-endian, back to back with no gaps, and cover the buffer exactly. The header is
//! padded with spaces to a multiple of 8 bytes (as the reference writer does), so the data
//! starts aligned. Names are sorted (the header is a JSON object; a reader keys by name).

use super::Tensor;
use crate::Error;
use std::collections::BTreeMap;

/// The format's name for a dtype.
fn dtype_name(t: &Tensor) -> &'static str {
    match t {
        Tensor::F32(_) => "F32",
        Tensor::F16(_) => "F16",
        Tensor::I32(_) => "I32",
        Tensor::Bool(_) => "BOOL",
    }
}

/// Appends `t`'s elements, row-major, little-endian (BOOL as one byte 0/1).
fn append_bytes(t: &Tensor, out: &mut Vec<u8>) {
    match t {
        Tensor::F32(a) => a.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Tensor::F16(a) => {
            a.iter().for_each(|&v| out.extend_from_slice(&super::float16::from_f32(v).to_bits().to_le_bytes()))
        }
        Tensor::I32(a) => a.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        Tensor::Bool(a) => a.iter().for_each(|&v| out.push(v as u8)),
    }
}

/// Serialises `tensors` (name, tensor) and string `metadata` into one safetensors file.
/// Errors name the cause: an empty or duplicate name, or the reserved `__metadata__`.
pub fn write(tensors: &[(String, &Tensor)], metadata: &BTreeMap<String, String>) -> crate::Result<Vec<u8>> {
    let mut sorted: Vec<&(String, &Tensor)> = tensors.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for pair in sorted.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(Error::tensor(format!("safetensors: the tensor name \"{}\" is used twice", pair[0].0)));
        }
    }
    let mut header = serde_json::Map::new();
    let mut offset = 0usize;
    for (name, t) in &sorted {
        if name.is_empty() {
            return Err(Error::tensor("safetensors: a tensor has an empty name"));
        }
        if name == "__metadata__" {
            return Err(Error::tensor("safetensors: \"__metadata__\" is reserved for the metadata, not a tensor name"));
        }
        let end = offset + t.nbytes();
        header.insert(
            name.clone(),
            serde_json::json!({ "dtype": dtype_name(t), "shape": t.shape(), "data_offsets": [offset, end] }),
        );
        offset = end;
    }
    if !metadata.is_empty() {
        header.insert("__metadata__".into(), serde_json::to_value(metadata)?);
    }
    let mut json = serde_json::to_vec(&header)?;
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + json.len() + offset);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    for (_, t) in &sorted {
        append_bytes(t, &mut out);
    }
    debug_assert_eq!(out.len(), 8 + json.len() + offset);
    Ok(out)
}

/// The tensors of a safetensors file, in the order of their data (name, tensor): what
/// `safetensors.torch.load_file` returns. F32, F16, I32 and BOOL are read (the engine's
/// dtypes; I64 too when every value fits in an int32, as the engine's int64 is its int32).
/// Errors name the cause: a file shorter than its header says, a header that is not a
/// JSON object of `{dtype, shape, data_offsets}`, an unknown dtype, offsets that do not
/// match the shape or leave gaps, a value out of int32's range.
pub fn read(bytes: &[u8]) -> crate::Result<Vec<(String, Tensor)>> {
    let bad = |m: String| Error::tensor(format!("safetensors: {m}"));
    if bytes.len() < 8 {
        return Err(bad(format!("a file of {} bytes has no header length (8 bytes)", bytes.len())));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let data_start = usize::try_from(n).ok().and_then(|n| n.checked_add(8)).filter(|&e| e <= bytes.len());
    let Some(data_start) = data_start else {
        return Err(bad(format!("the header is {n} bytes long but the file has {} after the length", bytes.len() - 8)));
    };
    let header: serde_json::Value =
        serde_json::from_slice(&bytes[8..data_start]).map_err(|e| bad(format!("the header is not JSON: {e}")))?;
    let Some(entries) = header.as_object() else { return Err(bad("the header is not a JSON object".into())) };
    let data = &bytes[data_start..];
    let mut out: Vec<(usize, usize, String, Tensor)> = Vec::new();
    for (name, e) in entries {
        if name == "__metadata__" {
            continue;
        }
        let field = |k: &str| e.get(k).ok_or_else(|| bad(format!("tensor \"{name}\" has no \"{k}\"")));
        let dtype = field("dtype")?.as_str().ok_or_else(|| bad(format!("tensor \"{name}\": dtype is not a string")))?;
        let dims = |v: &serde_json::Value, what: &str| -> crate::Result<Vec<usize>> {
            v.as_array()
                .and_then(|a| a.iter().map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok())).collect())
                .ok_or_else(|| bad(format!("tensor \"{name}\": {what} is not a list of whole numbers")))
        };
        let shape = dims(field("shape")?, "shape")?;
        let offsets = dims(field("data_offsets")?, "data_offsets")?;
        let [begin, end] = offsets[..] else {
            return Err(bad(format!("tensor \"{name}\": data_offsets must be [begin, end]")));
        };
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let width = match dtype {
            "F32" | "I32" => 4,
            "F16" => 2,
            "BOOL" => 1,
            "I64" => 8,
            other => {
                return Err(bad(format!(
                    "tensor \"{name}\": dtype {other} is not one the engine has (F32, F16, I32, BOOL)"
                )))
            }
        };
        if begin > end || end > data.len() || Some(end - begin) != numel.and_then(|n| n.checked_mul(width)) {
            return Err(bad(format!(
                "tensor \"{name}\": data_offsets [{begin}, {end}] do not hold {dtype} {shape:?} within the {} data bytes",
                data.len()
            )));
        }
        let raw = &data[begin..end];
        let t = match dtype {
            "F32" => Tensor::from_f32(
                &shape,
                raw.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4"))).collect(),
            )?,
            "F16" => {
                let v: Vec<f32> = raw
                    .chunks_exact(2)
                    .map(|c| super::float16::to_f32(half::f16::from_bits(u16::from_le_bytes(c.try_into().expect("2")))))
                    .collect();
                Tensor::from_f32_as_f16(&shape, &v)?
            }
            "I32" => Tensor::from_i32(
                &shape,
                raw.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().expect("4"))).collect(),
            )?,
            "I64" => {
                let v = raw
                    .chunks_exact(8)
                    .map(|c| {
                        let x = i64::from_le_bytes(c.try_into().expect("8"));
                        i32::try_from(x)
                            .map_err(|_| bad(format!("tensor \"{name}\": the I64 value {x} is out of int32's range")))
                    })
                    .collect::<crate::Result<Vec<i32>>>()?;
                Tensor::from_i32(&shape, v)?
            }
            _ => Tensor::from_bool(&shape, raw.iter().map(|&b| b != 0).collect())?,
        };
        out.push((begin, end, name.clone(), t));
    }
    out.sort_by_key(|(b, _, _, _)| *b);
    let mut at = 0;
    for (b, e, name, _) in &out {
        if *b != at {
            return Err(bad(format!(
                "tensor \"{name}\" starts at byte {b} of the data, not at {at}: the data has a gap or an overlap"
            )));
        }
        at = *e;
    }
    if at != data.len() {
        return Err(bad(format!("the tensors cover {at} of the {} data bytes", data.len())));
    }
    Ok(out.into_iter().map(|(_, _, n, t)| (n, t)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// Reads back the header as the format defines it: length, JSON, data after it.
    fn split(bytes: &[u8]) -> (serde_json::Value, &[u8]) {
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        (header, &bytes[8 + n..])
    }

    #[test]
    fn one_small_tensor_byte_for_byte() {
        // Written out by hand from the format's definition.
        let t = Tensor::from_f32(&[2], vec![1.0, -2.0]).unwrap();
        let bytes = write(&[("a".into(), &t)], &BTreeMap::new()).unwrap();
        let json = br#"{"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}}"#;
        let padded = json.len().div_ceil(8) * 8;
        let mut want = (padded as u64).to_le_bytes().to_vec();
        want.extend_from_slice(json);
        want.resize(8 + padded, b' ');
        want.extend_from_slice(&1.0f32.to_le_bytes());
        want.extend_from_slice(&(-2.0f32).to_le_bytes());
        assert_eq!(bytes, want);
    }

    #[test]
    fn header_offsets_dtypes_metadata_and_data() {
        let w = Tensor::from_f32(&[2, 3], vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0]).unwrap();
        let h = Tensor::from_f32_as_f16(&[3], &[1.0, -0.5, 65504.0]).unwrap();
        let i = Tensor::from_i32(&[2], vec![7, -1]).unwrap();
        let b = Tensor::from_bool(&[3], vec![true, false, true]).unwrap();
        let s = Tensor::scalar(4.0);
        let meta = BTreeMap::from([("format".to_string(), "pt".to_string())]);
        let tensors = [("w".into(), &w), ("h".into(), &h), ("i".into(), &i), ("b".into(), &b), ("s".into(), &s)];
        let bytes = write(&tensors, &meta).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        assert_eq!(n % 8, 0, "header padded to 8 bytes");
        assert_eq!(bytes[8], b'{');
        let (header, data) = split(&bytes);
        assert_eq!(header["__metadata__"], serde_json::json!({ "format": "pt" }));
        // Sorted by name: b, h, i, s, w; contiguous, covering the data exactly.
        let expect = [("b", "BOOL", vec![3], 0, 3), ("h", "F16", vec![3], 3, 9), ("i", "I32", vec![2], 9, 17)];
        for (name, dt, shape, lo, hi) in expect {
            assert_eq!(header[name]["dtype"], dt);
            assert_eq!(header[name]["shape"], serde_json::json!(shape));
            assert_eq!(header[name]["data_offsets"], serde_json::json!([lo, hi]));
        }
        assert_eq!(header["s"]["shape"], serde_json::json!([]), "a scalar has the empty shape");
        assert_eq!(header["s"]["data_offsets"], serde_json::json!([17, 21]));
        assert_eq!(header["w"]["data_offsets"], serde_json::json!([21, 45]));
        assert_eq!(data.len(), 45);
        assert_eq!(&data[0..3], &[1, 0, 1]);
        let halves: Vec<f32> =
            data[3..9].chunks(2).map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32()).collect();
        assert_eq!(halves, vec![1.0, -0.5, 65504.0]);
        assert_eq!(i32::from_le_bytes(data[13..17].try_into().unwrap()), -1);
        assert_eq!(f32::from_le_bytes(data[17..21].try_into().unwrap()), 4.0);
        let floats: Vec<f32> = data[21..45].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(floats, vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0], "row-major");
    }

    #[test]
    fn a_transposed_view_is_written_row_major() {
        let t = Tensor::from_f32(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        let Tensor::F32(a) = &t else { unreachable!() };
        let tt = Tensor::F32(a.clone().reversed_axes());
        let bytes = write(&[("t".into(), &tt)], &BTreeMap::new()).unwrap();
        let (_, data) = split(&bytes);
        let floats: Vec<f32> = data.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(floats, vec![1.0, 3.0, 2.0, 4.0]);
    }

    #[test]
    fn bad_names_are_refused() {
        let t = Tensor::scalar(1.0);
        let none = BTreeMap::new();
        let e = write(&[("x".into(), &t), ("x".into(), &t)], &none).unwrap_err().to_string();
        assert!(e.contains("\"x\" is used twice"), "{e}");
        assert!(write(&[("".into(), &t)], &none).unwrap_err().to_string().contains("empty name"));
        assert!(write(&[("__metadata__".into(), &t)], &none).unwrap_err().to_string().contains("reserved"));
    }

    #[test]
    fn read_gives_back_what_write_wrote() {
        let a = Tensor::from_f32(&[2, 2], vec![1.0, -2.5, 3.25, 0.0]).unwrap();
        let b = Tensor::from_i32(&[3], vec![7, -1, 2_000_000_000]).unwrap();
        let c = Tensor::from_bool(&[2], vec![true, false]).unwrap();
        let h = Tensor::from_f32_as_f16(&[1], &[0.333]).unwrap();
        let bytes =
            write(&[("w".into(), &a), ("idx".into(), &b), ("m".into(), &c), ("h".into(), &h)], &BTreeMap::new())
                .unwrap();
        let back = read(&bytes).unwrap();
        let names: Vec<&str> = back.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["h", "idx", "m", "w"]);
        assert_eq!(back[3].1.to_f32_vec(), vec![1.0, -2.5, 3.25, 0.0]);
        assert_eq!(back[3].1.shape(), &[2, 2]);
        assert_eq!(back[1].1, b);
        assert_eq!(back[2].1, c);
        // 0.333 as float16 is 0.333008 (0x3554: 2^-2 x (1 + 340/1024)): the bits, not the float32.
        assert_eq!(back[0].1.to_f32_vec(), vec![f16::from_bits(0x3554).to_f32()]);
    }

    #[test]
    fn read_takes_a_hand_written_file_with_int64() {
        // PyTorch's int64 labels: the engine's int32.
        let header = br#"{"y":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(&5i64.to_le_bytes());
        bytes.extend_from_slice(&(-3i64).to_le_bytes());
        let back = read(&bytes).unwrap();
        assert_eq!(back, vec![("y".to_string(), Tensor::from_i32(&[2], vec![5, -3]).unwrap())]);
    }

    #[test]
    fn read_refuses_bad_files_with_their_cause() {
        let msg = |b: &[u8]| read(b).unwrap_err().to_string();
        assert!(msg(&[1, 2]).contains("no header length"), "{}", msg(&[1, 2]));
        assert!(msg(&100u64.to_le_bytes()).contains("the header is 100 bytes long"));
        let file = |h: &str, data: &[u8]| {
            let mut b = (h.len() as u64).to_le_bytes().to_vec();
            b.extend_from_slice(h.as_bytes());
            b.extend_from_slice(data);
            b
        };
        assert!(msg(&file("[1]", &[])).contains("not a JSON object"));
        assert!(msg(&file(r#"{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}"#, &[0; 8])).contains("F64"));
        assert!(msg(&file(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#, &[0; 4]))
            .contains("do not hold F32 [2]"));
        assert!(msg(&file(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, &[0; 8]))
            .contains("cover 4 of the 8"));
        assert!(msg(&file(r#"{"a":{"dtype":"F32","shape":[1]}}"#, &[0; 4])).contains("no \"data_offsets\""));
    }
}
