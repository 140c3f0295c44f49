// The device log's entries (ours): what the agent appends is what the host drains, the text entries cut to fit at a
// character boundary, and the scratch payload of one entry never leaks into the next.
import { describe, expect, test } from "bun:test";
import { DeviceLogReader, DeviceLogWriter, LOG_PAYLOAD_BYTES, logBufferBytes, payloadText } from "./device_log.ts";

function rig() {
  const buffer = new SharedArrayBuffer(logBufferBytes(8));
  return { w: new DeviceLogWriter(buffer), r: new DeviceLogReader(buffer) };
}

describe("DeviceLogWriter", () => {
  test("appendBytes copies the bytes; a later, shorter entry carries only its own", () => {
    const { w, r } = rig();
    const record = new Uint8Array(16).map((_, i) => i + 1);
    w.appendBytes(5, 1, record);
    record.fill(0); // the caller's buffer is reused (the NQ producer encodes every record into one)
    w.appendBytes(6, 2, new Uint8Array([9, 9]));
    expect(r.drain()).toEqual([
      { kind: 5, nc: 1, payload: new Uint8Array(16).map((_, i) => i + 1) },
      { kind: 6, nc: 2, payload: new Uint8Array([9, 9]) },
    ]);
  });

  test("a text entry keeps its head bytes and cuts the text at a character boundary", () => {
    const { w, r } = rig();
    w.head.setUint8(0, 8);
    w.appendFilledText(7, 0, 1, "relu");
    w.appendText(8, 3, (v) => (v.setUint8(0, 0xab), 1), "é".repeat(LOG_PAYLOAD_BYTES)); // 2 bytes each
    w.appendText(9, 0, () => 0, "");
    const [dispatch, long, empty] = r.drain();
    expect(dispatch.payload[0]).toBe(8);
    expect(payloadText(dispatch.payload, 1)).toBe("relu");
    expect(long.payload[0]).toBe(0xab);
    // 248 payload bytes: the 1-byte head leaves 247, so 123 whole characters (246 bytes), never half of one.
    expect(long.payload.byteLength).toBe(1 + 246);
    expect(payloadText(long.payload, 1)).toBe("é".repeat(123));
    expect(empty.payload.byteLength).toBe(0);
  });
});
