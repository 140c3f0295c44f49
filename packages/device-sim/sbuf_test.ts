import { describe, expect, test } from "bun:test";
import { Q7Map } from "@nrt/core/isa";
import { SbufStore } from "./sbuf.ts";

const SBUF = 1 << 20;

/** A Q7 memory as a cluster has: the SBUF window at Q7Map.SBUF_BASE. */
function q7Memory(): WebAssembly.Memory {
  const pages = (Q7Map.SBUF_BASE + SBUF) / 65536;
  return new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
}

describe("SbufStore", () => {
  test("keeps the SBUF in the cluster's memory across a Q7 reset, and copies it only into another memory", () => {
    const store = new SbufStore(SBUF);
    store.write(16, new Uint8Array([1, 2, 3]));
    const first = q7Memory();
    store.attach(first);
    const window = new Uint8Array(first.buffer, Q7Map.SBUF_BASE, SBUF);
    expect([...window.subarray(16, 19)]).toEqual([1, 2, 3]);
    // A kernel writes the SBUF; the cluster goes away and the next one boots on the same memory.
    window[100] = 42;
    store.attach(first);
    expect([...store.read(16, 3)]).toEqual([1, 2, 3]);
    expect(store.read(100, 1)[0]).toBe(42);
    // DMA between two clusters lands where the next cluster on that memory reads it.
    store.write(200, new Uint8Array([9]));
    expect(window[200]).toBe(9);
    // A cluster on another memory gets the SBUF as it was.
    const second = q7Memory();
    store.attach(second);
    const moved = new Uint8Array(second.buffer, Q7Map.SBUF_BASE, SBUF);
    expect([moved[16], moved[17], moved[18], moved[100], moved[200]]).toEqual([1, 2, 3, 42, 9]);
    store.write(300, new Uint8Array([5]));
    expect(moved[300]).toBe(5);
    expect(window[300]).toBe(0);
  });
});
