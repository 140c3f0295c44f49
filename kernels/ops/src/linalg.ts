// gemm: Y = act(alpha · op(A) · op(B) + beta · C) over float32, batched over two merged batch levels with
// broadcasting (a batch stride of 0), which covers ONNX MatMul, Gemm and the fused nrt.FusedGemm. Every operand
// is addressed through its strides, so transposes are free. The kernel picks one of three modes:
// - tile: units are (batch, block of rows, block of columns); a core computes 4 × 8 tiles with the SIMD
//   micro-kernels of _gemm.ts, reading B's columns in place when they are contiguous and packing a panel into its
//   scratch otherwise;
// - dot: A and B both contiguous along k and at most 4 rows per batch (a product against a transposed weight):
//   each output is a SIMD dot product, each B row read as one stream;
// - vector: one row per batch and B's columns contiguous (a row vector times a matrix): B is read row after row.
import { customop_cleanup, customop_total_cpus, get_cpu_id, localScratch, nextF64, nextInput, nextInt, nextOutput } from "./_abi";
import { ACC_ROW_BYTES, activate, clearAcc, packPanel, tileRows } from "./_gemm";

/**
 * Scratch layout: float64 accumulators (tile: up to 32 rows of 8; vector: up to ROW_COLS columns), then a packed
 * panel of up to KC rows of B (tile) or the float32 column accumulators (vector).
 */
const ACC: i32 = 1024;
const PANEL: i32 = 20480;
const KC: i32 = 1024;

/** Horizontal float64 sum of the four float32 lanes of `v`. */
@inline function hsum(v: v128): f64 {
  const s = f64x2.add(f64x2.promote_low_f32x4(v), f64x2.promote_low_f32x4(v128.shuffle<f32>(v, v, 2, 3, 2, 3)));
  return f64x2.extract_lane(s, 0) + f64x2.extract_lane(s, 1);
}

/** Columns one vector-mode unit covers at most (its float32 and float64 accumulators fill the scratch). */
const ROW_COLS: i32 = 2048;

/**
 * y64[0..cols) = Σ_k A(k) · B(k, 0..cols) for one row of A against rows of B whose columns are contiguous: B is
 * read row after row, each as one contiguous run, into float32 accumulators flushed to float64 every F32 run.
 */
function rowTimesMatrix(pa: i32, ka: i32, pb: i32, kb: i32, k: i32, cols: i32, y32: i32, y64: i32): void {
  const c4 = ASC_FEATURE_SIMD ? cols & ~3 : 0;
  memory.fill(y64, 0, cols << 3);
  for (let k0 = 0; k0 < k; k0 += 64) {
    const kend = min(k, k0 + 64);
    memory.fill(y32, 0, cols << 2);
    for (let t = k0; t < kend; t++) {
      const a = load<f32>(pa + t * ka);
      const row = pb + t * kb;
      let j = 0;
      if (ASC_FEATURE_SIMD) {
        const av = f32x4.splat(a);
        for (; j < c4; j += 4) {
          const p = y32 + (j << 2);
          v128.store(p, f32x4.add(v128.load(p), f32x4.mul(av, v128.load(row + (j << 2)))));
        }
      }
      for (; j < cols; j++) store<f32>(y32 + (j << 2), load<f32>(y32 + (j << 2)) + a * load<f32>(row + (j << 2)));
    }
    for (let j = 0; j < cols; j++) {
      store<f64>(y64 + (j << 3), load<f64>(y64 + (j << 3)) + <f64>load<f32>(y32 + (j << 2)));
    }
  }
}

/** out[0] = dot(A row, B column) for one column whose k run is contiguous, reading it as one stream. */
function dot1(pa: i32, pb: i32, k: i32, out: i32): void {
  let s: f64 = 0;
  let t = 0;
  if (ASC_FEATURE_SIMD) {
    const k16 = k & ~15;
    while (t < k16) {
      const tend = min(k16, t + 256);
      let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
      for (; t < tend; t += 16) {
        const p = pa + (t << 2), q = pb + (t << 2);
        c0 = f32x4.add(c0, f32x4.mul(v128.load(p), v128.load(q)));
        c1 = f32x4.add(c1, f32x4.mul(v128.load(p, 16), v128.load(q, 16)));
        c2 = f32x4.add(c2, f32x4.mul(v128.load(p, 32), v128.load(q, 32)));
        c3 = f32x4.add(c3, f32x4.mul(v128.load(p, 48), v128.load(q, 48)));
      }
      s += hsum(f32x4.add(f32x4.add(c0, c1), f32x4.add(c2, c3)));
    }
  }
  for (; t < k; t++) s += <f64>load<f32>(pa + (t << 2)) * <f64>load<f32>(pb + (t << 2));
  store<f64>(out, s);
}

/**
 * ints: B1, B2 (batch levels), M, N, K; A's strides sA1, sA2, sAi, sAk; B's strides sB1, sB2, sBk, sBn; hasC,
 * C's strides sC1, sC2, sCi, sCj (0 broadcasts); alpha, beta (float64 bits); activation code, p0, p1 (float64
 * bits). Strides are in elements. Inputs A, B and, when hasC, C; output Y contiguous [B1, B2, M, N].
 */
export function gemm(): void {
  const pa = nextInput(), pb = nextInput();
  const b1n = nextInt(), b2n = nextInt(), m = nextInt(), n = nextInt(), k = nextInt();
  const sA1 = nextInt(), sA2 = nextInt(), sAi = nextInt(), sAk = nextInt();
  const sB1 = nextInt(), sB2 = nextInt(), sBk = nextInt(), sBn = nextInt();
  const hasC = nextInt() != 0;
  const sC1 = nextInt(), sC2 = nextInt(), sCi = nextInt(), sCj = nextInt();
  const alpha = nextF64(), beta = nextF64();
  const act = nextInt();
  const p0 = nextF64(), p1 = nextF64();
  const pc = hasC ? nextInput() : 0;
  const py = nextOutput();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const scratch = localScratch();
    const acc = scratch + ACC, panel = scratch + PANEL;
    const batches = b1n * b2n;
    const want = 2 * total;
    if (sAk == 1 && sBk == 1 && m <= 4) {
      // Dot-product mode: units are (batch, block of columns); each B column is read once, for every row.
      const blocks = batches >= want ? 1 : min(n, (want + batches - 1) / batches);
      const width = (n + blocks - 1) / blocks;
      const units = batches * blocks;
      const chunk = (units + total - 1) / total;
      const uEnd = min(units, (cpu + 1) * chunk);
      for (let u = min(units, cpu * chunk); u < uEnd; u++) {
        const bb = u / blocks, blk = u % blocks;
        const b1 = bb / b2n, b2 = bb % b2n;
        const baseA = pa + ((b1 * sA1 + b2 * sA2) << 2);
        const baseB = pb + ((b1 * sB1 + b2 * sB2) << 2);
        const j1 = min(n, (blk + 1) * width);
        for (let j = blk * width; j < j1; j++) {
          const colB = baseB + ((j * sBn) << 2);
          for (let i = 0; i < m; i++) {
            dot1(baseA + ((i * sAi) << 2), colB, k, acc);
            let v = load<f64>(acc) * alpha;
            if (hasC) v += beta * <f64>load<f32>(pc + ((b1 * sC1 + b2 * sC2 + i * sCi + j * sCj) << 2));
            store<f32>(py + (((bb * m + i) * n + j) << 2), <f32>activate(act, v, p0, p1));
          }
        }
      }
    } else if (m == 1 && sBn == 1) {
      // Vector mode: units are (batch, block of columns); B is read row by row.
      const maxBlocks = (n + 3) >> 2;
      let blocks = batches >= want ? 1 : min(maxBlocks, (want + batches - 1) / batches);
      blocks = max(blocks, (n + ROW_COLS - 1) / ROW_COLS);
      const width = (((n + blocks - 1) / blocks + 3) >> 2) << 2;
      const units = batches * blocks;
      const chunk = (units + total - 1) / total;
      const uEnd = min(units, (cpu + 1) * chunk);
      const y32 = panel;
      for (let u = min(units, cpu * chunk); u < uEnd; u++) {
        const bb = u / blocks, j0 = (u % blocks) * width;
        const b1 = bb / b2n, b2 = bb % b2n;
        const cols = min(width, n - j0);
        if (cols <= 0) continue;
        const rowA = pa + ((b1 * sA1 + b2 * sA2) << 2), rowsB = pb + ((b1 * sB1 + b2 * sB2 + j0) << 2);
        rowTimesMatrix(rowA, sAk << 2, rowsB, sBk << 2, k, cols, y32, acc);
        const cBase = pc + ((b1 * sC1 + b2 * sC2 + j0 * sCj) << 2);
        const y = py + ((bb * n + j0) << 2);
        for (let c = 0; c < cols; c++) {
          let v = load<f64>(acc + (c << 3)) * alpha;
          if (hasC) v += beta * <f64>load<f32>(cBase + ((c * sCj) << 2));
          store<f32>(y + (c << 2), <f32>activate(act, v, p0, p1));
        }
      }
    } else {
      // Tile mode: units are (batch, block of rb rows, block of columns).
      let rb = 32;
      while (rb > 4 && batches * ((m + rb - 1) / rb) < want) rb >>= 1;
      const rowBlocks = (m + rb - 1) / rb;
      const tiles = (n + 7) >> 3;
      const lanes = batches * rowBlocks;
      const colBlocks = lanes >= want ? 1 : min(tiles, (want + lanes - 1) / lanes);
      const width = ((tiles + colBlocks - 1) / colBlocks) << 3;
      const units = lanes * colBlocks;
      const chunk = (units + total - 1) / total;
      const uEnd = min(units, (cpu + 1) * chunk);
      for (let u = min(units, cpu * chunk); u < uEnd; u++) {
        const lane = u / colBlocks, blk = u % colBlocks;
        const bb = lane / rowBlocks, i0 = (lane % rowBlocks) * rb;
        const b1 = bb / b2n, b2 = bb % b2n;
        const rows = min(rb, m - i0);
        const baseA = pa + ((b1 * sA1 + b2 * sA2 + i0 * sAi) << 2);
        const baseB = pb + ((b1 * sB1 + b2 * sB2) << 2);
        const j1 = min(n, (blk + 1) * width);
        for (let j = blk * width; j < j1; j += 8) {
          const cols = min(8, j1 - j);
          clearAcc(acc, rows);
          if (sBn == 1 && cols == 8) {
            tileRows(rows, baseA, sAi << 2, sAk << 2, baseB + (j << 2), sBk << 2, k, acc);
          } else {
            for (let k0 = 0; k0 < k; k0 += KC) {
              const kc = min(KC, k - k0);
              packPanel(baseB + ((k0 * sBk + j * sBn) << 2), sBk << 2, sBn << 2, kc, cols, panel);
              tileRows(rows, baseA + ((k0 * sAk) << 2), sAi << 2, sAk << 2, panel, 32, kc, acc);
            }
          }
          for (let r = 0; r < rows; r++) {
            const i = i0 + r;
            const y = py + (((bb * m + i) * n + j) << 2);
            const cBase = pc + ((b1 * sC1 + b2 * sC2 + i * sCi + j * sCj) << 2);
            for (let c = 0; c < cols; c++) {
              let v = load<f64>(acc + r * ACC_ROW_BYTES + (c << 3)) * alpha;
              if (hasC) v += beta * <f64>load<f32>(cBase + ((c * sCj) << 2));
              store<f32>(y + (c << 2), <f32>activate(act, v, p0, p1));
            }
          }
        }
      }
    }
  }
  customop_cleanup();
}
