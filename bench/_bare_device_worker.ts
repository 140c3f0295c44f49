/**
 * The bare device of bench/http.ts's limit row: a Worker that sleeps in `Atomics.waitAsync` on a shared ring, takes
 * each request's slot, applies relu to its 8 floats and notifies the slot. It uses nothing of the runtime (ours).
 *
 * @module
 */
/// <reference lib="deno.worker" />
import { BareRing } from "./_bare_device.ts";

/**
 * The live JS cells of this Worker's heap (`bun:jsc`), after a full collection when asked: the bare device's side of
 * `bench/alloc.ts`'s device-thread row. `undefined` on V8.
 */
function heapCells(collect: boolean): number | undefined {
  const require = (import.meta as { require?: (id: string) => unknown }).require;
  if (require === undefined) return undefined;
  const jsc = require("bun:jsc") as { heapStats(): { objectTypeCounts: Record<string, number> }; gcAndSweep(): void };
  if (collect) jsc.gcAndSweep();
  let n = 0;
  for (const v of Object.values(jsc.heapStats().objectTypeCounts)) n += v;
  return n;
}

self.onmessage = async (e: MessageEvent<SharedArrayBuffer | { cells: boolean }>) => {
  if (!(e.data instanceof SharedArrayBuffer)) {
    self.postMessage({ cells: heapCells(e.data.cells) });
    return;
  }
  const sab = e.data;
  const ring = new Int32Array(sab, 0, BareRing.HEADER_WORDS + BareRing.SLOTS);
  const data = new Float32Array(sab, BareRing.DATA_OFFSET, BareRing.SLOTS * BareRing.FLOATS);
  const done = new Int32Array(sab, BareRing.DONE_OFFSET, BareRing.SLOTS);
  let handled = 0;
  for (;;) {
    const written = Atomics.load(ring, BareRing.WRITTEN);
    while (handled < written) {
      const slot = ring[BareRing.HEADER_WORDS + (handled % BareRing.SLOTS)];
      for (let i = slot * BareRing.FLOATS, end = i + BareRing.FLOATS; i < end; i++) if (!(data[i] > 0)) data[i] = 0;
      Atomics.add(done, slot, 1);
      Atomics.notify(done, slot);
      handled++;
    }
    if (Atomics.load(ring, BareRing.STOP) !== 0) break;
    Atomics.store(ring, BareRing.SLEEPING, 1);
    if (Atomics.load(ring, BareRing.WRITTEN) === written) {
      const w = Atomics.waitAsync(ring, BareRing.WRITTEN, written);
      if (w.async) await w.value;
    }
    Atomics.store(ring, BareRing.SLEEPING, 0);
  }
  self.close();
};
