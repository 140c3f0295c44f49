// The nrta_* scheduler at close, without a device: a host whose state guard refuses with 14 once closed, tensors
// that take that guard at every access (as the runtime's do), and executions that record whether they ran or were
// cancelled. Seed lifecycle-error-model §3.2 (stop the async worker, drain, then tear down) and §1.1 (14 after
// close); tests/async_bounds_test.ts drives a real runtime.
import { describe, expect, test } from "bun:test";
import { NrtError } from "../error.ts";
import type { Tensor } from "../tensor.ts";
import { Nrta, NrtaErrorTracker, type NrtaRequest, type PreparedExecution } from "./nrta.ts";

class FakeHost {
  readonly vncCount = 1;
  closed = false;
  readonly log: string[] = [];
  guard(): void {
    if (this.closed) throw new NrtError(14, "Runtime is closed");
  }
  vncOf(): number {
    return 0;
  }
  /** A tensor whose accesses take the host's guard first, as `Tensor` does. */
  tensor(name: string, gate?: { entered(): void; leave: Promise<void> }): Tensor {
    const t = {
      name,
      write: async () => {
        this.guard();
        this.log.push(`write ${name}`);
        if (gate !== undefined) {
          gate.entered();
          await gate.leave;
        }
      },
      readInto: () => {
        this.guard();
        this.log.push(`read ${name}`);
        return Promise.resolve();
      },
    };
    return t as unknown as Tensor;
  }
  /** A prepared execution: `run` does not take the guard (the reference was taken at prepare). */
  execution(name: string): PreparedExecution & { state: string } {
    const x = {
      vnc: 0,
      state: "ready",
      run: () => {
        x.state = "ran";
        this.log.push(`execute ${name}`);
        return Promise.resolve();
      },
      cancel: () => {
        if (x.state === "ready") x.state = "cancelled";
      },
    };
    return x;
  }
}

const status = (p: Promise<unknown>): Promise<number> =>
  p.then(() => 0, (e) => (e instanceof NrtError ? e.status : -1));

function thrown(f: () => unknown): number {
  try {
    f();
    return 0;
  } catch (e) {
    return e instanceof NrtError ? e.status : -1;
  }
}

/** Three rounds of write → execute → read, plus an execution and a read that name nothing. */
function schedule(host: FakeHost, nrta: Nrta, errors: NrtaErrorTracker) {
  const a = host.tensor("a"), out = host.tensor("out");
  const reqs: NrtaRequest[] = [];
  const xs: Array<{ state: string }> = [];
  for (let k = 0; k < 3; k++) {
    const w = nrta.tensorWrite(a, new Uint8Array(4), 0, { errors });
    const px = host.execution(`x${k}`);
    xs.push(px);
    const x = nrta.executeSchedule(px, { after: [w], errors });
    const r = nrta.tensorRead(new Uint8Array(4), out, 0, 4, { after: [x], errors });
    reqs.push(w, x, r);
  }
  const px = host.execution("free");
  xs.push(px);
  reqs.push(nrta.executeSchedule(px, { errors }));
  reqs.push(nrta.tensorRead(new Uint8Array(4), host.tensor("out2"), 0, 4, { queue: 1, errors }));
  return { reqs, xs };
}

describe("nrta at close (seed lifecycle-error-model §3.2, §1.1)", () => {
  test("close() drains: every request scheduled before it runs, in order; later ones are refused with 14", async () => {
    const host = new FakeHost();
    const nrta = new Nrta(host);
    const errors = new NrtaErrorTracker(0);
    const { reqs, xs } = schedule(host, nrta, errors);
    const closing = nrta.close(); // the runtime's close, before its state becomes CLOSED
    expect(nrta.closed).toBe(true);
    // Refused at once, an execution's reference dropped.
    expect(thrown(() => nrta.tensorRead(new Uint8Array(4), host.tensor("late"), 0, 4))).toBe(14);
    const late = host.execution("late");
    expect(thrown(() => nrta.executeSchedule(late))).toBe(14);
    expect(late.state).toBe("cancelled");
    await closing;
    host.closed = true;
    expect(await Promise.all(reqs.map((q) => status(q.done)))).toEqual(reqs.map(() => 0));
    expect(xs.map((x) => x.state)).toEqual(["ran", "ran", "ran", "ran"]);
    expect(errors.list()).toEqual([]);
    // The COMPUTE queue in its order, each execution after its write, each read after its execution.
    const log = host.log;
    expect(log.filter((l) => l.startsWith("execute"))).toEqual([
      "execute x0",
      "execute x1",
      "execute x2",
      "execute free",
    ]);
    expect(log.filter((l) => l === "write a").length).toBe(3);
    expect(log.filter((l) => l === "read out").length).toBe(3);
    expect(log.filter((l) => l === "read out2").length).toBe(1);
    const nth = (what: string, k: number) =>
      log.findIndex((_, i) => log.slice(0, i + 1).filter((l) => l === what).length === k + 1);
    for (let k = 0; k < 3; k++) {
      expect(nth("write a", k)).toBeLessThan(log.indexOf(`execute x${k}`));
      expect(log.indexOf(`execute x${k}`)).toBeLessThan(nth("read out", k));
    }
    // After the host's close, the queries take its state guard too (lifecycle-error-model §1.1: 14).
    expect(thrown(() => nrta.isCompleted(reqs[0].seq))).toBe(14);
    host.closed = false;
    for (const q of reqs) expect(nrta.isCompleted(q.seq)).toBe(true);
    await nrta.close(); // again: the same, settled drain
  });

  test("a host closed without close(): every request not started fails with 14, executions cancelled", async () => {
    const host = new FakeHost();
    const nrta = new Nrta(host);
    const errors = new NrtaErrorTracker(0);
    const { reqs, xs } = schedule(host, nrta, errors);
    host.closed = true; // the runtime's state flips with the requests queued
    const statuses = await Promise.all(reqs.map((q) => status(q.done)));
    // One status for writes, executions and reads alike (the reads were 14 and the executions 0).
    expect(statuses).toEqual(reqs.map(() => 14));
    expect(xs.map((x) => x.state)).toEqual(["cancelled", "cancelled", "cancelled", "cancelled"]);
    expect(host.log).toEqual([]);
    expect(errors.list().map((e) => e.error_code)).toEqual(reqs.map(() => 14));
    await nrta.drain();
  });

  test("a request already running when the host closes finishes; those queued behind it fail with 14", async () => {
    const host = new FakeHost();
    const nrta = new Nrta(host);
    let release!: () => void;
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    const slow = host.tensor("slow", { entered: () => entered(), leave: new Promise<void>((r) => (release = r)) });
    const w = nrta.tensorWrite(slow, new Uint8Array(4));
    const px = host.execution("after");
    const x = nrta.executeSchedule(px, { after: [w] });
    const r = nrta.tensorRead(new Uint8Array(4), host.tensor("out"), 0, 4, { after: [x] });
    // The write is inside its tensor access: close the host, then let the write finish.
    await inside;
    host.closed = true;
    release();
    expect(await status(w.done)).toBe(0);
    // The execution waiting for the write and the read behind it had not started: refused alike.
    expect(await status(x.done)).toBe(14);
    expect(await status(r.done)).toBe(14);
    expect(px.state).toBe("cancelled");
    await nrta.drain();
  });
});
