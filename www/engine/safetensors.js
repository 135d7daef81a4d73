// A module's trained state as a .safetensors file (the format of Hugging Face's safetensors:
// an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and
// byte range, then the tensors' bytes), written from host tensors { shape, dtype, data }.

const DTYPES = { float32: "F32", float16: "F16", int32: "I32", bool: "BOOL" };

/** IEEE half bits of `v` (round to nearest even). */
function halfBits(v) {
  const f = new Float32Array([v]);
  const x = new Uint32Array(f.buffer)[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rest > half || (rest === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++;
  return sign | h;
}

function bytesOf({ dtype, data }) {
  switch (dtype) {
    case "float32":
      return new Uint8Array(Float32Array.from(data).buffer);
    case "int32":
      return new Uint8Array(Int32Array.from(data).buffer);
    case "float16":
      return new Uint8Array(Uint16Array.from(data, halfBits).buffer);
    case "bool":
      return Uint8Array.from(data, (v) => (v ? 1 : 0));
    default:
      throw new Error(`safetensors: no dtype for ${dtype}`);
  }
}

/** `entries`: [[name, { shape, dtype, data }]] → the file's bytes (little-endian hosts: every browser). */
export function safetensors(entries, metadata = {}) {
  const header = { __metadata__: metadata };
  const parts = [];
  let offset = 0;
  for (const [name, t] of entries) {
    const b = bytesOf(t);
    header[name] = { dtype: DTYPES[t.dtype], shape: t.shape, data_offsets: [offset, offset + b.length] };
    parts.push(b);
    offset += b.length;
  }
  let json = new TextEncoder().encode(JSON.stringify(header));
  const pad = (8 - (json.length % 8)) % 8;
  if (pad) json = new TextEncoder().encode(JSON.stringify(header) + " ".repeat(pad));
  const out = new Uint8Array(8 + json.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  let at = 8 + json.length;
  for (const b of parts) {
    out.set(b, at);
    at += b.length;
  }
  return out;
}
