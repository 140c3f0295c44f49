/**
 * The bare device of bench/http.ts's limit row: a Worker that sleeps in `Atomics.waitAsync` on a shared ring, takes
 * each request's slot, applies relu to its 8 floats and notifies the slot. It uses nothing of the runtime (ours).
 *
 * @module
 */
/// <reference lib="deno.worker" />
import { BareRing } from "./_bare_device.ts";

self.onmessage = async (e: MessageEvent<SharedArrayBuffer>) => {
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
