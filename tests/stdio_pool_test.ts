import { afterAll, describe, expect, test } from "bun:test";
import { MemoryLogger } from "@nrt/core";
import {
  POOL_STDIO_BLOCK_BYTES,
  POOL_STDIO_DESCRIPTOR_BYTES,
  POOL_STDIO_MAGIC,
  POOL_STDIO_STDERR_BASE,
  POOL_STDIO_STDOUT_BASE,
  PoolStdioStreamTag,
} from "@nrt/core/isa";
import { TracingPortal } from "@nrt/core/portal";
import { DmemLedger } from "../packages/core/dmem/dmem.ts";
import {
  poolStdioBlockDestroy,
  poolStdioBlockDrain,
  poolStdioBlockInit,
  type PoolStdioQueue,
} from "../packages/core/stdio/pool_stdio.ts";
import { DeviceSimPortal } from "@nrt/device-sim";
import { createKhal } from "@nrt/core/hal";
import { cayman } from "@nrt/arch-cayman";

const opened: DeviceSimPortal[] = [];
afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

function setup() {
  const sim = new DeviceSimPortal();
  opened.push(sim);
  const portal = new TracingPortal(sim);
  const log = new MemoryLogger();
  const ledger = new DmemLedger(portal, log, 1 << 30);
  const s = { khal: createKhal(cayman), target: { portal, device: 0 }, ledger, log };
  return { sim, portal, log, ledger, s };
}

const u64 = (b: Uint8Array, at: number) =>
  new DataView(b.buffer, b.byteOffset).getUint32(at, true) +
  new DataView(b.buffer, b.byteOffset).getUint32(at + 4, true) * 2 ** 32;
const u32 = (b: Uint8Array, at: number) => new DataView(b.buffer, b.byteOffset).getUint32(at, true);

/** Writes entries as the device's file-IO manager does: 16-byte header, text, write index + 1. */
async function deviceWrite(portal: TracingPortal, q: PoolStdioQueue, texts: Uint8Array[]): Promise<void> {
  const ring = q.hostQueueDmem.memory;
  let write = u32(await portal.memRead(ring, q.writeIdxOffset, 4), 0);
  for (const t of texts) {
    const e = new Uint8Array(0x100);
    const v = new DataView(e.buffer);
    v.setUint32(0, write + 1, true);
    e[4] = 1;
    v.setUint16(6, t.byteLength, true);
    e.set(t, 0x10);
    await portal.memWrite(ring, (write % q.queueSizeEntries) * 0x100, e);
    write++;
  }
  const w = new Uint8Array(4);
  new DataView(w.buffer).setUint32(0, write, true);
  await portal.memWrite(ring, q.writeIdxOffset, w);
}

const line = (k: number) => new TextEncoder().encode(`line ${k}\n`);

describe("pool_stdio host side (seed spmd-teardown §5)", () => {
  test("pool_stdio_block_init wires slot [0]: the 0x440 block, the descriptor heads, stdout size / 0x100 and 4 stderr entries", async () => {
    const { portal, s, sim } = setup();
    const sb = await poolStdioBlockInit(s, 0, 4096);
    expect(sb.hbmSpaceDmem.memory.bytes).toBe(POOL_STDIO_BLOCK_BYTES);
    expect(sb.hbmSpaceDmem.memory.pa % 0x800).toBe(0);
    expect(sb.stdoutQueues.map((q) => q !== undefined)).toEqual([
      true,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(sb.stderrQueues.map((q) => q !== undefined)).toEqual([
      true,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
    const out = sb.stdoutQueues[0]!, err = sb.stderrQueues[0]!;
    expect([out.queueSizeEntries, err.queueSizeEntries]).toEqual([16, 4]);
    expect([out.hostQueueDmem.memory.bytes, err.hostQueueDmem.memory.bytes]).toEqual([16 * 0x100 + 4, 4 * 0x100 + 4]);
    expect([out.readIdxOffset, err.readIdxOffset]).toEqual([0x400, 0x420]);
    expect([out.q7Idx, out.readIdxLocal, out.streamTag, err.streamTag]).toEqual([
      0,
      0,
      PoolStdioStreamTag.STDOUT,
      PoolStdioStreamTag.STDERR,
    ]);
    const block = await portal.memRead(sb.hbmSpaceDmem.memory, 0, POOL_STDIO_BLOCK_BYTES);
    for (
      const [d, q, base] of [[0, out, POOL_STDIO_STDOUT_BASE], [
        8 * POOL_STDIO_DESCRIPTOR_BYTES,
        err,
        POOL_STDIO_STDERR_BASE,
      ]] as const
    ) {
      expect(new DataView(block.buffer).getUint16(d, true)).toBe(POOL_STDIO_MAGIC);
      expect(block[d + 2]).toBe(0);
      expect(u32(block, d + 0xc)).toBe(q.queueSizeEntries);
      expect(u64(block, d + 0x10)).toBe(q.hostQueueDmem.memory.pa);
      expect(u64(block, d + 0x18)).toBe(sb.hbmSpaceDmem.memory.pa + base);
      expect(u64(block, d + 0x20)).toBe(q.hostQueueDmem.memory.pa + q.queueSizeEntries * 0x100);
    }
    // Slots [1..7] are not described; the read indices start at 0.
    expect(new DataView(block.buffer).getUint16(POOL_STDIO_DESCRIPTOR_BYTES, true)).toBe(0);
    expect(u64(block, 0x400)).toBe(0);
    // The Q7 file-IO table points at the block: the device describes both rings.
    expect(sim.stdioQueues(0, 0)).toEqual({
      stdout: { capacity: 16, writeIndex: 0, readIndex: 0, overruns: 0 },
      stderr: { capacity: 4, writeIndex: 0, readIndex: 0, overruns: 0 },
    });
    await poolStdioBlockDestroy(s, sb);
    expect((await sim.memUsage(0)).allocations).toBe(0);
  });

  test("0 turns stdout off; a size that is not a power of two of 256-byte entries is refused", async () => {
    const { s, sim } = setup();
    const sb = await poolStdioBlockInit(s, 1, 0);
    expect(sb.stdoutQueues[0]).toBeUndefined();
    expect(sb.stderrQueues[0]?.queueSizeEntries).toBe(4);
    expect(sim.stdioQueues(0, 1).stdout).toBeUndefined();
    await poolStdioBlockDestroy(s, sb);
    await expect(poolStdioBlockInit(s, 1, 768)).rejects.toThrow(RangeError);
    expect((await sim.memUsage(0)).allocations).toBe(0);
  });

  test("consume_all_entries: the clamp keeps the newest cap entries in order across the wrap, in two segments, and publishes the read index", async () => {
    const { portal, s, log } = setup();
    const sb = await poolStdioBlockInit(s, 0, 4096);
    const q = sb.stdoutQueues[0]!;
    await deviceWrite(portal, q, Array.from({ length: 20 }, (_, k) => line(k)));
    portal.clear();
    const drained = await poolStdioBlockDrain(s, sb);
    expect(drained.map((d) => d.text)).toEqual(Array.from({ length: 16 }, (_, k) => `line ${k + 4}\n`));
    expect(drained.every((d) => d.tag === PoolStdioStreamTag.STDOUT)).toBe(true);
    // One 4-byte write-index read per ring, then two segments of the stdout ring: [4..15] and [0..3].
    const reads = portal.entries.filter((e) => e.op === "memRead" && e.target === q.hostQueueDmem.memory.id).map((e) =>
      e.value
    );
    expect(reads).toEqual([4, 12 * 0x100, 4 * 0x100]);
    expect(
      log.messages().filter((m) =>
        m.includes("pool stdio stdout queue overflow: 4 entries lost, keeping the last 16 (3840 bytes)")
      ).length,
    ).toBe(1);
    expect(sb.overruns).toBe(4);
    expect(q.readIdxLocal).toBe(20);
    expect(u64(await portal.memRead(sb.hbmSpaceDmem.memory, 0x400, 8), 0)).toBe(20);
    expect(log.entries.filter((e) => e.fields?.stream === "stdout").map((e) => e.message).slice(-2)).toEqual([
      "line 18",
      "line 19",
    ]);
    // A full 0xf0-byte record has no terminator; the next drain reads one contiguous segment.
    const full = new Uint8Array(0xf0).fill(0x61);
    await deviceWrite(portal, q, [full, line(99)]);
    expect((await poolStdioBlockDrain(s, sb)).map((d) => d.text)).toEqual(["a".repeat(0xf0), "line 99\n"]);
    expect(await poolStdioBlockDrain(s, sb)).toEqual([]);
    await poolStdioBlockDestroy(s, sb);
  });

  test("stderr is drained with stream tag 1 after stdout, each logged under its stream", async () => {
    const { portal, s, log } = setup();
    const sb = await poolStdioBlockInit(s, 0, 256);
    await deviceWrite(portal, sb.stderrQueues[0]!, [new TextEncoder().encode("boom\n")]);
    await deviceWrite(portal, sb.stdoutQueues[0]!, [new TextEncoder().encode("hello\n")]);
    expect(await poolStdioBlockDrain(s, sb)).toEqual([{ tag: 3, text: "hello\n" }, { tag: 1, text: "boom\n" }]);
    expect(log.entries.map((e) => [e.message, e.fields?.tag])).toEqual([["hello", 3], ["boom", 1]]);
    await poolStdioBlockDestroy(s, sb);
  });
});
