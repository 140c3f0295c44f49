/**
 * `Tensor.readInto`: `nrt_tensor_read(tensor, buf, offset, size)` as the C call has it — the bytes land in the
 * caller's buffer — over a portal with `memReadInto`, over one without it (the fallback through `memRead`), for
 * device, host and sliced tensors, and through the `nrt_*` facade and `nrta_tensor_read`.
 */
import { describe, expect, test } from "bun:test";
import { createNullLogger, NrtError, NrtStatus, type Portal } from "@nrt/core";
import { NullPortal } from "@nrt/core/testing";
import type { DeviceMemory } from "@nrt/core/portal";
import { CAYMAN_SPEC } from "@nrt/arch-cayman/spec";
import { DmemLedger } from "../packages/core/dmem/dmem.ts";
import { allocateTensor, type TensorContext } from "../packages/core/tensor.ts";

/** A portal that forwards everything but `memReadInto`, so a tensor must fall back on `memRead`. */
function withoutReadInto(inner: Portal): Portal & { memReads: number } {
  const counts = { memReads: 0 };
  return new Proxy(inner, {
    get(target, key) {
      if (key === "memReadInto") return undefined;
      if (key === "memReads") return counts.memReads;
      if (key === "memRead") {
        return (m: DeviceMemory, o: number, n: number) => {
          counts.memReads++;
          return target.memRead(m, o, n);
        };
      }
      const v = Reflect.get(target, key, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  }) as Portal & { memReads: number };
}

function context(portal: Portal): TensorContext {
  return { portal, ledger: new DmemLedger(portal, createNullLogger(), 1 << 30), guard: () => {} };
}

const pattern = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 13 + 7) & 0xff);

describe("Tensor.readInto (nrt_tensor_read into the caller's buffer)", () => {
  for (
    const [name, make] of [
      ["a portal with memReadInto", () => new NullPortal(CAYMAN_SPEC)],
      ["a portal without it (memRead fallback)", () => withoutReadInto(new NullPortal(CAYMAN_SPEC))],
    ] as const
  ) {
    test(`device tensor over ${name}: bytes land at the caller's view, nothing around it is touched`, async () => {
      const portal = make();
      const t = await allocateTensor(context(portal), "device", 0, 0, 256, "t");
      const data = pattern(256);
      await t.write(data);
      const buf = new Uint8Array(300).fill(0xaa);
      await t.readInto(buf.subarray(20, 120), 40);
      expect(Array.from(buf.subarray(20, 120))).toEqual(Array.from(data.subarray(40, 140)));
      expect(buf[19]).toBe(0xaa);
      expect(buf[120]).toBe(0xaa);
      // A slice reads relative to its own first byte.
      const s = t.slice(64, 64);
      const into = new Uint8Array(16);
      await s.readInto(into, 8);
      expect(Array.from(into)).toEqual(Array.from(data.subarray(72, 88)));
      if ("memReads" in portal) expect(portal.memReads).toBe(2);
      await t.free();
    });
  }

  test("a range outside the tensor is NRT_INVALID and leaves the buffer as it was; a freed tensor is NRT_INVALID_HANDLE", async () => {
    const t = await allocateTensor(context(new NullPortal(CAYMAN_SPEC)), "device", 0, 0, 64, "t");
    await t.write(pattern(64));
    const buf = new Uint8Array(32).fill(0x11);
    for (const offset of [40, -1, 0.5]) {
      const e = await t.readInto(buf, offset).then(() => undefined, (x: unknown) => x);
      expect(e).toBeInstanceOf(NrtError);
      expect((e as NrtError).status).toBe(NrtStatus.NRT_INVALID);
    }
    expect(Array.from(buf)).toEqual(new Array(32).fill(0x11));
    await t.free();
    const gone = await t.readInto(buf).then(() => undefined, (x: unknown) => x);
    expect((gone as NrtError).status).toBe(NrtStatus.NRT_INVALID_HANDLE);
  });

  test("host tensor: the same bytes as read(), into the caller's buffer", async () => {
    const t = await allocateTensor(context(new NullPortal(CAYMAN_SPEC)), "host", 0, 0, 128, "h");
    const data = pattern(128);
    await t.write(data);
    const into = new Uint8Array(100);
    await t.readInto(into, 28);
    expect(Array.from(into)).toEqual(Array.from(await t.read(28, 100)));
    expect(Array.from(into)).toEqual(Array.from(data.subarray(28)));
    await t.free();
  });
});
