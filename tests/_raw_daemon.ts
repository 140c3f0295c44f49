/**
 * What the tests of the device daemon against protocol-breaking clients share (ours): an in-process daemon over a
 * simulated device and an in-memory link, a raw client that sends frames as given and keeps every answer, frame
 * builders with increasing request ids, an answer's error, and a wait on the event loop.
 *
 * @module
 */
import { DeviceSimPortal } from "@nrt/device-sim";
import {
  BodyReader,
  DeviceDaemon,
  type Dialer,
  type Frame,
  FrameBuilder,
  FrameDecoder,
  linkPair,
  Op,
  PROTOCOL_VERSION,
} from "../packages/device-sim/remote/mod.ts";

const sims: DeviceSimPortal[] = [];

/** A daemon over a new simulated device: `dial` connects a client over an in-memory link; `logs` has its lines. */
export function daemonRig(): { sim: DeviceSimPortal; daemon: DeviceDaemon; dial: Dialer; logs: string[] } {
  const sim = new DeviceSimPortal();
  sims.push(sim);
  const logs: string[] = [];
  const daemon = new DeviceDaemon({
    portal: sim,
    spec: sim.spec,
    resetCore: (d, nc) => sim.resetQ7(d, nc),
    log: (line) => logs.push(line),
  });
  return { sim, daemon, logs, dial: linkPair((l) => daemon.accept(l)) };
}

/** Closes every device {@linkcode daemonRig} made (a test file's `afterAll`). */
export async function closeDaemonRigs(): Promise<void> {
  for (const s of sims.splice(0)) await s.close();
}

/** Frame builders with increasing request ids: `frame` for any request, `hello` for a session's first. */
export function frames(): {
  frame: (op: number, fixed: number, tail?: number) => FrameBuilder;
  hello: (name?: string, pid?: number) => Uint8Array;
} {
  let id = 1;
  const frame = (op: number, fixed: number, tail = 0) => new FrameBuilder(id++, op, fixed, tail);
  const hello = (name = "raw", pid = 4242) => {
    const text = new TextEncoder().encode(name);
    return frame(Op.HELLO, 8, text.byteLength).u32(PROTOCOL_VERSION).u32(pid).finish(text);
  };
  return { frame, hello };
}

/** A raw client: sends frames as given (several in one write), keeps every answer, and whether the link closed. */
export async function rawClient(dial: Dialer) {
  const answers: Frame[] = [];
  const dec = new FrameDecoder();
  let closed = false;
  const link = await dial({
    data: (chunk) => answers.push(...dec.push(chunk).map((f) => ({ ...f, body: f.body.slice() }))),
    closed: () => (closed = true),
  });
  return {
    ...frames(),
    answers,
    get closed(): boolean {
      return closed;
    },
    /** Sends frames in one write. */
    send: (...sent: Uint8Array[]) =>
      link.send(sent.length === 1 ? sent[0] : Uint8Array.from(sent.flatMap((f) => [...f]))),
    close: () => link.close(),
  };
}

/** Turns of the event loop until `cond` holds. */
export async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 5_000 && !cond(); i++) await new Promise<void>((r) => setTimeout(r, 0));
  if (!cond()) throw new Error(`Gave up waiting for ${what}`);
}

/** An answer's error: its NRT status and message (undefined for a success). */
export function error(f: Frame | undefined): { status: number; message: string } | undefined {
  if (f === undefined || f.status === 0) return undefined;
  const r = new BodyReader(f.body);
  const status = r.u32();
  r.u8();
  return { status, message: new TextDecoder().decode(r.rest()) };
}
