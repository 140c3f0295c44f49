// 2-D convolution (1-D as H = 1) and pooling over float32 NCHW tensors.
//
// conv2d is a GEMM per (image, group): Y[m, p] = Σ_q W[m, q] · col[q, p] with q = (c, kh, kw) and p an output
// pixel. Work units are (image, group, panel of 8 output pixels, block of output channels), split over the cores.
// A core builds the im2col panel [q, 8 pixels] for its unit in its scratch (zeros where the window overhangs the
// padding), K-chunked to fit, and runs the 4 × 8 SIMD micro-kernels of _gemm.ts with float64 accumulation. A 1 × 1
// convolution with unit strides and no padding reads X in place instead of building a panel. A depthwise
// convolution (one channel per group) is computed directly instead (depthwise below).
import { customop_cleanup, customop_total_cpus, get_cpu_id, localScratch, nextF64, nextInput, nextInt, nextOutput } from "./_abi";
import { ACC_ROW_BYTES, activate, clearAcc, storeRow, tileRows } from "./_gemm";

/** Scratch layout: the 8 pixels' window origins, float64 accumulators for up to 256 rows, the im2col panel. */
const COORDS: i32 = 512;
const ACC: i32 = 1024;
const PANEL: i32 = 20480;
const KC: i32 = 1024;
const MAX_ROWS: i32 = 256;

/**
 * Fills the panel rows for q in [k0, k0 + kc) of the 8 pixels whose window origins (ih, iw) are at COORDS
 * (pixels at or past `cols` are zero). `row` tells that the 8 pixels are consecutive in one output row, so they
 * share ih and their iw step by the stride: then a row of the panel is a zero fill, a contiguous copy or a strided
 * gather without bounds checks, except where the window overhangs the left or right padding.
 */
function buildPanel(
  x: i32, h: i32, w: i32, kh: i32, kw: i32, dh: i32, dw: i32, sw: i32,
  k0: i32, kc: i32, cols: i32, row: bool, coords: i32, panel: i32,
): void {
  const khw = kh * kw;
  let c = k0 / khw;
  const r = k0 % khw;
  let fh = r / kw, fw = r % kw;
  const ih0 = load<i32>(coords), iw0 = load<i32>(coords, 32);
  for (let q = 0; q < kc; q++) {
    const dst = panel + (q << 5);
    const plane = x + ((c * h * w) << 2);
    const offH = fh * dh, offW = fw * dw;
    const ih = ih0 + offH, iw = iw0 + offW;
    if (row && (ih < 0 || ih >= h)) {
      memory.fill(dst, 0, 32);
    } else if (row && iw >= 0 && iw + 7 * sw < w) {
      const src = plane + ((ih * w + iw) << 2);
      if (sw == 1) {
        if (ASC_FEATURE_SIMD) {
          v128.store(dst, v128.load(src));
          v128.store(dst, v128.load(src, 16), 16);
        } else {
          memory.copy(dst, src, 32);
        }
      } else {
        const step = sw << 2;
        for (let t = 0; t < 8; t++) store<f32>(dst + (t << 2), load<f32>(src + t * step));
      }
    } else {
      for (let t = 0; t < 8; t++) {
        let v: f32 = 0;
        if (t < cols) {
          const y = load<i32>(coords + (t << 2)) + offH, z = load<i32>(coords + (t << 2), 32) + offW;
          if (y >= 0 && y < h && z >= 0 && z < w) v = load<f32>(plane + ((y * w + z) << 2));
        }
        store<f32>(dst + (t << 2), v);
      }
    }
    if (++fw == kw) {
      fw = 0;
      if (++fh == kh) {
        fh = 0;
        c++;
      }
    }
  }
}

/** Taps a depthwise window may have for the direct kernel (its float32 sums stay this short). */
const DEPTHWISE_MAX_TAPS: i32 = 64;

/**
 * Depthwise convolution (one input and one output channel per group): units are output rows (image, channel,
 * oh), each computed directly. Outputs whose whole window lies inside the image take no bounds checks, four at a
 * time in SIMD when the stride is 1; the window's products are summed in float32 (at most 64 of them).
 */
function depthwise(
  px: i32, pw: i32, pb: i32, py: i32, n: i32, c: i32, h: i32, w: i32, kh: i32, kw: i32, oh: i32, ow: i32,
  sh: i32, sw: i32, dh: i32, dw: i32, pt: i32, pl: i32, act: i32, p0: f64, p1: f64, cpu: i32, total: i32,
): void {
  const rows = n * c * oh;
  const per = (rows + total - 1) / total;
  const end = min(rows, (cpu + 1) * per);
  // Output columns whose window is inside [0, w): ow·sw - pl >= 0 and ow·sw - pl + (kw - 1)·dw < w.
  const lo = min(ow, (pl + sw - 1) / sw);
  const hiRaw = w - 1 - (kw - 1) * dw + pl;
  const hi = hiRaw < 0 ? lo : max(lo, min(ow, hiRaw / sw + 1));
  for (let ro = min(rows, cpu * per); ro < end; ro++) {
    const plane = ro / oh, orow = ro % oh, ch = plane % c;
    const xp = px + ((plane * h * w) << 2), wp = pw + ((ch * kh * kw) << 2);
    const y = py + ((ro * ow) << 2);
    const bias: f64 = pb != 0 ? <f64>load<f32>(pb + (ch << 2)) : 0;
    const ihs = orow * sh - pt;
    for (let j = 0; j < ow; j++) {
      if (j == lo && hi > lo) {
        // The interior of the row.
        let jj = lo;
        if (ASC_FEATURE_SIMD && sw == 1) {
          for (; jj + 4 <= hi; jj += 4) {
            let s = f32x4.splat(0);
            for (let a = 0; a < kh; a++) {
              const ih = ihs + a * dh;
              if (ih < 0 || ih >= h) continue;
              const src = xp + ((ih * w + jj - pl) << 2);
              for (let b = 0; b < kw; b++) {
                const tap = v128.load32_splat(wp + ((a * kw + b) << 2));
                s = f32x4.add(s, f32x4.mul(v128.load(src + ((b * dw) << 2)), tap));
              }
            }
            for (let t = 0; t < 4; t++) {
              const v = <f64>f32x4.extract_lane(s, 0) + bias;
              store<f32>(y + ((jj + t) << 2), <f32>activate(act, v, p0, p1));
              s = v128.shuffle<f32>(s, s, 1, 2, 3, 0);
            }
          }
        }
        for (; jj < hi; jj++) {
          let s: f32 = 0;
          for (let a = 0; a < kh; a++) {
            const ih = ihs + a * dh;
            if (ih < 0 || ih >= h) continue;
            const src = xp + ((ih * w + jj * sw - pl) << 2);
            for (let b = 0; b < kw; b++) s += load<f32>(src + ((b * dw) << 2)) * load<f32>(wp + ((a * kw + b) << 2));
          }
          store<f32>(y + (jj << 2), <f32>activate(act, <f64>s + bias, p0, p1));
        }
        j = hi - 1;
        continue;
      }
      // A border output: every tap checked.
      let s: f32 = 0;
      const iws = j * sw - pl;
      for (let a = 0; a < kh; a++) {
        const ih = ihs + a * dh;
        if (ih < 0 || ih >= h) continue;
        for (let b = 0; b < kw; b++) {
          const iw = iws + b * dw;
          if (iw >= 0 && iw < w) s += load<f32>(xp + ((ih * w + iw) << 2)) * load<f32>(wp + ((a * kw + b) << 2));
        }
      }
      store<f32>(y + (j << 2), <f32>activate(act, <f64>s + bias, p0, p1));
    }
  }
}

/**
 * ints: N, C, H, W, M, KH, KW, OH, OW, strideH, strideW, dilationH, dilationW, padTop, padLeft, group, hasBias,
 * activation code, p0, p1 (float64 bits). Inputs X [N, C, H, W], W [M, C / group, KH, KW] and, when hasBias,
 * B [M]; output Y [N, M, OH, OW]. The bottom and right padding are implied by OH and OW.
 */
export function conv2d(): void {
  const px = nextInput(), pw = nextInput();
  const n = nextInt(), c = nextInt(), h = nextInt(), w = nextInt(), m = nextInt();
  const kh = nextInt(), kw = nextInt(), oh = nextInt(), ow = nextInt();
  const sh = nextInt(), sw = nextInt(), dh = nextInt(), dw = nextInt(), pt = nextInt(), pl = nextInt();
  const group = nextInt(), hasBias = nextInt() != 0, act = nextInt();
  const p0 = nextF64(), p1 = nextF64();
  const pb = hasBias ? nextInput() : 0;
  const py = nextOutput();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const cg = c / group, mg = m / group, ckk = cg * kh * kw, ohw = oh * ow, hw = h * w;
    if (cg == 1 && mg == 1 && kh * kw <= DEPTHWISE_MAX_TAPS) {
      depthwise(px, pw, pb, py, n, c, h, w, kh, kw, oh, ow, sh, sw, dh, dw, pt, pl, act, p0, p1, cpu, total);
      customop_cleanup();
      return;
    }
    const scratch = localScratch();
    const coords = scratch + COORDS, acc = scratch + ACC, panel = scratch + PANEL;
    const panels = (ohw + 7) >> 3;
    const base = n * group * panels;
    const want = 2 * total;
    let chunks = (mg + MAX_ROWS - 1) / MAX_ROWS;
    if (base * chunks < want) chunks = min((mg + 3) >> 2, (want + base - 1) / base);
    const mw = (((mg + chunks - 1) / chunks + 3) >> 2) << 2;
    chunks = (mg + mw - 1) / mw;
    const direct = kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w;
    const units = base * chunks;
    const per = (units + total - 1) / total;
    const uEnd = min(units, (cpu + 1) * per);
    for (let u = min(units, cpu * per); u < uEnd; u++) {
      const mc = u % chunks, rest = u / chunks;
      const p = (rest % panels) << 3, ng = rest / panels;
      const g = ng % group, img = ng / group;
      const m0 = mc * mw, rows = min(mw, mg - m0);
      const cols = min(8, ohw - p);
      const xBase = px + (((img * c + g * cg) * hw) << 2);
      const wBase = pw + (((g * mg + m0) * ckk) << 2);
      clearAcc(acc, rows);
      if (direct && cols == 8) {
        tileRows(rows, wBase, ckk << 2, 4, xBase + (p << 2), hw << 2, ckk, acc);
      } else {
        for (let t = 0; t < 8; t++) {
          const q = min(p + t, ohw - 1);
          store<i32>(coords + (t << 2), (q / ow) * sh - pt);
          store<i32>(coords + (t << 2), (q % ow) * sw - pl, 32);
        }
        const row = cols == 8 && (p % ow) + 8 <= ow;
        for (let k0 = 0; k0 < ckk; k0 += KC) {
          const kc = min(KC, ckk - k0);
          buildPanel(xBase, h, w, kh, kw, dh, dw, sw, k0, kc, cols, row, coords, panel);
          tileRows(rows, wBase + (k0 << 2), ckk << 2, 4, panel, 32, kc, acc);
        }
      }
      for (let r = 0; r < rows; r++) {
        const oc = g * mg + m0 + r;
        const bias: f64 = hasBias ? <f64>load<f32>(pb + (oc << 2)) : 0;
        storeRow(acc + r * ACC_ROW_BYTES, py + (((img * m + oc) * ohw + p) << 2), cols, bias, act, p0, p1);
      }
    }
  }
  customop_cleanup();
}

const POOL_MAX: i32 = 0;
const POOL_AVG_INCLUDE_PAD: i32 = 1;

/**
 * Max or average pooling over the two trailing dimensions. ints: kind (0 max, 1 average counting the padding,
 * 2 average over the in-bounds elements), planes (N · C), H, W, OH, OW, KH, KW, strideH, strideW, dilationH,
 * dilationW, padTop, padLeft, padBottom, padRight. Input X [planes, H, W], output Y [planes, OH, OW]; output rows
 * are split over the cores. Sums are float64.
 */
export function pool2d(): void {
  const px = nextInput(), py = nextOutput();
  const kind = nextInt(), planes = nextInt(), h = nextInt(), w = nextInt(), oh = nextInt(), ow = nextInt();
  const kh = nextInt(), kw = nextInt(), sh = nextInt(), sw = nextInt(), dh = nextInt(), dw = nextInt();
  const pt = nextInt(), pl = nextInt(), pbot = nextInt(), pr = nextInt();
  const cpu = get_cpu_id(), total = customop_total_cpus();
  if (cpu < total && py != 0) {
    const rowsAll = planes * oh;
    const per = (rowsAll + total - 1) / total;
    const end = min(rowsAll, (cpu + 1) * per);
    // Output columns whose window is inside [0, w) when undilated (as in depthwise).
    const lo = min(ow, (pl + sw - 1) / sw);
    const hiRaw = w - kw + pl;
    const hi = hiRaw < 0 ? lo : max(lo, min(ow, hiRaw / sw + 1));
    const simd = ASC_FEATURE_SIMD && dh == 1 && dw == 1 && (sw == 1 || sw == 2) && kh * kw <= 64;
    for (let ro = min(rowsAll, cpu * per); ro < end; ro++) {
      const plane = px + (((ro / oh) * h * w) << 2);
      const hs = (ro % oh) * sh - pt;
      const y = py + ((ro * ow) << 2);
      let jv = lo, simdEnd = lo;
      if (simd) {
        // The interior, four outputs at a time; stride-2 windows take the even lanes of two loads.
        simdEnd = lo + ((hi - lo) & ~3);
        const h0 = max(hs, 0), h1 = min(hs + kh, h);
        const inside = <f32>(max(0, h1 - h0) * kw), padded = <f32>((min(hs + kh, h + pbot) - hs) * kw);
        const count = f32x4.splat(kind == POOL_AVG_INCLUDE_PAD ? padded : inside);
        for (; jv < simdEnd; jv += 4) {
          let v = kind == POOL_MAX ? f32x4.splat(-Infinity) : f32x4.splat(0);
          for (let ih = h0; ih < h1; ih++) {
            const src = plane + ((ih * w + jv * sw - pl) << 2);
            for (let b = 0; b < kw; b++) {
              const at = src + (b << 2);
              // Elements 0, 2, 4, 6 from loads of elements 0..3 and 3..6: nothing past the window is read.
              const x = sw == 1 ? v128.load(at) : v128.shuffle<f32>(v128.load(at), v128.load(at, 12), 0, 2, 5, 7);
              v = kind == POOL_MAX ? f32x4.max(v, x) : f32x4.add(v, x);
            }
          }
          v128.store(y + (jv << 2), kind == POOL_MAX ? v : f32x4.div(v, count));
        }
      }
      for (let j = 0; j < ow; j++) {
        if (j >= lo && j < simdEnd) j = simdEnd;
        if (j >= ow) break;
        const ws = j * sw - pl;
        let best: f32 = -Infinity;
        let sum: f64 = 0;
        let inside = 0, padded = 0;
        if (dh == 1 && dw == 1) {
          // Undilated: clamp the window once, then no bounds checks.
          const h0 = max(hs, 0), h1 = min(hs + kh, h), w0 = max(ws, 0), w1 = min(ws + kw, w);
          inside = max(0, h1 - h0) * max(0, w1 - w0);
          padded = (min(hs + kh, h + pbot) - hs) * (min(ws + kw, w + pr) - ws);
          for (let ih = h0; ih < h1; ih++) {
            const src = plane + ((ih * w) << 2);
            if (kind == POOL_MAX) {
              // A compare and select: f32.max's NaN and signed-zero handling costs several instructions.
              for (let iw = w0; iw < w1; iw++) {
                const v = load<f32>(src + (iw << 2));
                best = v > best ? v : best;
              }
            }
            else for (let iw = w0; iw < w1; iw++) sum += <f64>load<f32>(src + (iw << 2));
          }
        } else {
          for (let a = 0; a < kh; a++) {
            const ih = hs + a * dh;
            const rowPadded = ih >= -pt && ih < h + pbot;
            const rowIn = ih >= 0 && ih < h;
            for (let b = 0; b < kw; b++) {
              const iw = ws + b * dw;
              if (rowPadded && iw >= -pl && iw < w + pr) padded++;
              if (rowIn && iw >= 0 && iw < w) {
                const v = load<f32>(plane + ((ih * w + iw) << 2));
                inside++;
                if (kind == POOL_MAX) best = max<f32>(best, v);
                else sum += <f64>v;
              }
            }
          }
        }
        let out: f32;
        if (kind == POOL_MAX) out = best;
        else out = <f32>(sum / <f64>(kind == POOL_AVG_INCLUDE_PAD ? padded : inside));
        store<f32>(y + (j << 2), out);
      }
    }
  }
  customop_cleanup();
}
