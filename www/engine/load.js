// Loads the engine's wasm: the relaxed-SIMD build where this browser accepts it (fused
// multiply-adds: matrix products about twice as fast), else the plain simd128 build.
// Both come from the same sources and share one JS glue (scripts/build-wasm.sh checks).
//
//   import { loadEngine } from "./load.js";
//   const { simd } = await loadEngine();   // simd: "relaxed" or "simd128"
import init from "../pkg/ipu_playground.js";

// The smallest module using a relaxed-SIMD instruction: () -> v128 returning
// f32x4.relaxed_madd(0, 0, 0). WebAssembly.validate says whether this engine knows it.
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type section: () -> v128
  0x03, 0x02, 0x01, 0x00, // function section: one function of type 0
  0x0a, 0x3d, 0x01, 0x3b, 0x00, // code section: one body of 59 bytes, no locals
  ...[0, 1, 2].flatMap(() => [0xfd, 0x0c, ...new Array(16).fill(0)]), // 3 × v128.const 0
  0xfd, 0x85, 0x02, // f32x4.relaxed_madd
  0x0b, // end
]);

/** Whether this WebAssembly engine supports relaxed SIMD. */
export function hasRelaxedSimd() {
  try {
    return WebAssembly.validate(RELAXED_PROBE);
  } catch {
    return false;
  }
}

let loading = null;

/**
 * Instantiates the engine once; resolves to `{ simd, memory }`: the build in use and the
 * wasm instance's memory (it only grows; a caller may watch its size). With
 * `{ relaxed: false }` the plain build is loaded even where relaxed SIMD would work (to
 * compare the two).
 */
export function loadEngine({ relaxed = true } = {}) {
  loading ??= (async () => {
    if (relaxed && hasRelaxedSimd()) {
      try {
        const exports = await init({ module_or_path: new URL("../pkg/ipu_playground_relaxed_bg.wasm", import.meta.url) });
        return { simd: "relaxed", memory: exports.memory };
      } catch {
        // not built or not served: the plain build below does everything, a bit slower
      }
    }
    const exports = await init({ module_or_path: new URL("../pkg/ipu_playground_bg.wasm", import.meta.url) });
    return { simd: "simd128", memory: exports.memory };
  })();
  return loading;
}
