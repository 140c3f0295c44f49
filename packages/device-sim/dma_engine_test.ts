import { describe, expect, test } from "bun:test";
import { KBIN_DMA_RING_TYPE_CUSTOM_OP } from "@nrt/core/hal";
import type { DeviceMemory } from "@nrt/core/portal";
import { DMA_DESCRIPTOR_BYTES, DmaDirection, encodeDmaDescriptor, NotificationKind, Opcode } from "@nrt/core/isa";
import { TpbFaultMask } from "./sequencer.ts";
import { TestHost } from "./_testing.ts";

const DOORBELL = 2, DONE = 30, SHARE = 16, CORES = 8, SBUF_AT = 0x1000;

async function roundTrip(h: TestHost, m2sBytes: number, s2mRings?: DeviceMemory[]) {
  const input = Uint8Array.from({ length: CORES * SHARE }, (_, i) => (i * 7 + 1) & 0xff);
  const src = await h.put(input);
  const dst = await h.put(CORES * SHARE);
  const m2s = await h.stageRings(
    Array.from(
      { length: CORES },
      (_, c) => [{ src: src.pa + c * SHARE, dst: h.sbufPa(SBUF_AT + c * SHARE), bytes: SHARE }],
    ),
  );
  const s2m = await h.stageRings(
    Array.from(
      { length: CORES },
      (_, c) => [{ src: h.sbufPa(SBUF_AT + c * SHARE), dst: dst.pa + c * SHARE, bytes: SHARE }],
    ),
    s2mRings,
  );
  await h.installStream([
    { op: Opcode.DMA_CONFIG, direction: DmaDirection.M2S, queues: CORES, ringTable: m2s.pa },
    { op: Opcode.DMA_CONFIG, direction: DmaDirection.S2M, queues: CORES, ringTable: s2m.pa },
    { op: Opcode.DMA_CONFIG_SIZE, m2sBytes, s2mBytes: CORES * SHARE },
    { op: Opcode.DRAIN_ARM },
    { op: Opcode.DRAIN },
    { op: Opcode.EVENT_SEMAPHORE, updateMode: 0x13, semaphore: DONE, value: 0 },
    { op: Opcode.NOTIFY, kind: NotificationKind.EXEC_DONE, value: 0 },
  ], DOORBELL);
  await h.fire(DOORBELL);
  return { input, dst };
}

describe("DmaEngine", () => {
  test("DmaEngine moves HBM → SBUF → HBM through the 8 custom-op queues and counts each core's share", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    const { input, dst } = await roundTrip(h, CORES * SHARE);
    expect([...await h.portal.memRead(dst, 0, input.byteLength)]).toEqual([...input]);
    expect(h.portal.queueBytes(0, 0)).toEqual({ m2s: new Array(CORES).fill(SHARE), s2m: new Array(CORES).fill(SHARE) });
    const { records } = await h.read();
    expect(records.map((r) => r.kind)).toEqual([NotificationKind.EVENT_SEMAPHORE, NotificationKind.EXEC_DONE]);
    expect(h.portal.q7Events().filter((e) => e.kind === "cluster-started")).toHaveLength(0);
    await h.portal.close();
  });

  test("DmaEngine reads each run's descriptors as the host last wrote them", async () => {
    // kbl_compute_setup rewrites the rings when an execution's I/O addresses change; the next run must follow them.
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    const rings: DeviceMemory[] = [];
    const { input, dst } = await roundTrip(h, CORES * SHARE, rings);
    const moved = await h.put(CORES * SHARE);
    for (let c = 0; c < CORES; c++) {
      const d = new Uint8Array(DMA_DESCRIPTOR_BYTES);
      encodeDmaDescriptor({ src: h.sbufPa(SBUF_AT + c * SHARE), dst: moved.pa + c * SHARE, bytes: SHARE }, d, 0);
      await h.portal.memWrite(rings[c], 0, d);
    }
    await h.portal.memWrite(dst, 0, new Uint8Array(CORES * SHARE)); // cleared: the second run must not write it
    await h.fire(DOORBELL);
    expect([...await h.portal.memRead(moved, 0, input.byteLength)]).toEqual([...input]);
    expect([...await h.portal.memRead(dst, 0, input.byteLength)]).toEqual(new Array(input.byteLength).fill(0));
    expect(h.portal.queueBytes(0, 0).s2m).toEqual(new Array(CORES).fill(2 * SHARE));
    await h.portal.close();
  });

  test("DmaEngine refuses an M2S total that differs from DMA_CONFIG_SIZE", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    await roundTrip(h, CORES * SHARE + 4);
    const { records } = await h.read();
    expect(records.map((r) => [r.kind, r.mask, r.value])).toEqual([[NotificationKind.TPB_ERROR, TpbFaultMask.DMA, 2]]);
    expect(h.portal.sequencerFaults(0, 0)[0].message).toContain("expects 132 B");
    await h.portal.close();
  });

  test("DmaEngine refuses a ring outside the custom-op queue bundle", async () => {
    const h = new TestHost({ hbmBytes: 1 << 24 });
    await h.attachNq(8);
    const table = new Uint8Array(16);
    const v = new DataView(table.buffer);
    v.setUint8(0, 0);
    v.setUint8(1, 3); // queue 3 is not the custom-op queue (15)
    v.setUint16(2, KBIN_DMA_RING_TYPE_CUSTOM_OP, true);
    const t = await h.put(table);
    await h.installStream(
      [{ op: Opcode.DMA_CONFIG, direction: DmaDirection.M2S, queues: 1, ringTable: t.pa }],
      DOORBELL,
    );
    await h.fire(DOORBELL);
    const { records } = await h.read();
    expect(records.map((r) => r.mask)).toEqual([TpbFaultMask.DMA]);
    await h.portal.close();
  });
});
