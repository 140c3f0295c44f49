import { describe, expect, test } from "bun:test";
import { FaultInjector, FaultKind, FIRED_FAULTS_KEPT, localSink } from "./fault_injector.ts";

/** An injector over one device of one NeuronCore whose port this thread plays. */
function oneCore() {
  const sink = localSink(1, 1);
  const faults = new FaultInjector(1, 1, { q7Cores: 8, dmaEngines: 16 }, sink);
  return { faults, port: sink.port(0, 0) };
}

describe("FaultInjector.fired()", () => {
  test("keeps the newest FIRED_FAULTS_KEPT firings, oldest first, and counts the older ones", () => {
    const { faults, port } = oneCore();
    const total = FIRED_FAULTS_KEPT * 2 + 200;
    for (let i = 1; i <= total; i++) {
      faults.inject({ kind: FaultKind.RECOVERABLE, nc: 0 });
      expect(port.take("instruction").length).toBe(1);
      if (i === FIRED_FAULTS_KEPT) {
        expect(faults.fired().map((f) => f.id)).toEqual(Array.from({ length: i }, (_, k) => k + 1));
        expect(faults.firedDropped()).toBe(0);
      }
    }
    const fired = faults.fired();
    expect(fired.length).toBe(FIRED_FAULTS_KEPT);
    expect(fired.map((f) => f.id)).toEqual(
      Array.from({ length: FIRED_FAULTS_KEPT }, (_, k) => total - FIRED_FAULTS_KEPT + 1 + k),
    );
    expect(fired.every((f) => f.kind === FaultKind.RECOVERABLE && f.device === 0 && f.nc === 0)).toBe(true);
    expect(faults.firedDropped()).toBe(total - FIRED_FAULTS_KEPT);
    expect(faults.pending()).toEqual([]);
  });

  test("is a list of its own: changing it changes nothing the injector keeps", () => {
    const { faults, port } = oneCore();
    faults.inject({ kind: FaultKind.FP_NAN, nc: 0 });
    port.take("instruction");
    (faults.fired() as unknown[]).length = 0;
    expect(faults.fired().map((f) => f.kind)).toEqual([FaultKind.FP_NAN]);
  });
});

describe("FaultInjector.inject() refusals", () => {
  test("names a number JSON cannot write as it was sent: 1e999 is Infinity, not null", () => {
    const { faults } = oneCore();
    const spec = JSON.parse('{"kind": "hang", "atExecution": 1e999}');
    expect(() => faults.inject(spec)).toThrow(
      'Cannot inject fault "hang": "atExecution" is Infinity, expected an integer from 1 to 2147483647',
    );
    expect(() => faults.inject({ kind: "hang", atExecution: -Infinity })).toThrow('"atExecution" is -Infinity');
    expect(() => faults.inject({ kind: "hang", nc: Number.NaN })).toThrow('"nc" is NaN, expected an integer');
    expect(() => faults.inject({ kind: "hbm-ue", repairable: Infinity } as never)).toThrow(
      '"repairable" is Infinity, expected true or false',
    );
    expect(() => faults.inject({ kind: "hang", atExecution: 2n } as never)).toThrow('"atExecution" is 2n');
    expect(() => faults.inject({ kind: "hang", atExecution: "3" } as never)).toThrow('"atExecution" is "3"');
    expect(faults.pending()).toEqual([]);
  });
});
