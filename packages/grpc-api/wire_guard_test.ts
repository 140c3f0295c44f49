import { describe, expect, test } from "bun:test";
import { GrpcCode, GrpcError } from "./grpc_status.ts";
import { checkFraming, checkInferRequest, type InferBounds, readInferHead } from "./wire_guard.ts";

// A small protobuf writer (encoding.md), independent of the module under test.
const varint = (n: number): number[] => {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
};
const tag = (field: number, wire: number): number[] => varint(field * 8 + wire);
const len = (field: number, bytes: number[]): number[] => [...tag(field, 2), ...varint(bytes.length), ...bytes];
const str = (field: number, s: string): number[] => len(field, [...new TextEncoder().encode(s)]);
const f32 = (v: number): number[] => [...new Uint8Array(Float32Array.of(v).buffer)];
const bytes = (...parts: number[][]): Uint8Array => Uint8Array.from(parts.flat());

// ModelInferRequest: model_name 1, model_version 2, id 3, parameters 4, inputs 5, outputs 6, raw_input_contents 7.
// InferInputTensor: name 1, datatype 2, shape 3, parameters 4, contents 5. InferTensorContents: fp32_contents 6.
const param = (key: string): number[] => len(4, [...str(1, key), ...len(2, [...tag(1, 0), 1])]);
const input = (name: string, ...fields: number[][]): number[] =>
  len(5, [...str(1, name), ...str(2, "FP32"), ...fields.flat()]);
const packedShape = (...dims: number[]): number[] => len(3, dims.flatMap(varint));
const packedFp32 = (n: number): number[] => len(5, len(6, Array.from({ length: n }, (_, i) => f32(i)).flat()));

/** Bounds of a model with one input "x" of 8 elements, 256 requested outputs: 1 + 16 inputs. */
const BOUNDS: InferBounds = { inputs: 1 + 16, outputs: 256, elements: (name) => (name === "x" ? 8 : 8) };

function refusal(f: () => unknown): GrpcError {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(GrpcError);
    expect((e as GrpcError).code).toBe(GrpcCode.INVALID_ARGUMENT);
    return e as GrpcError;
  }
  throw new Error("expected a refusal");
}

describe("wire_guard: a ModelInferRequest read on the wire", () => {
  test("readInferHead() reads model_name, model_version and id (the last of each) and skips the rest", () => {
    const buf = bytes(str(1, "old"), input("x", packedShape(8)), str(1, "relu"), str(2, "1"), str(3, "req-7"));
    expect(readInferHead(buf)).toEqual({ modelName: "relu", modelVersion: "1", id: "req-7" });
    expect(readInferHead(new Uint8Array(0))).toEqual({ modelName: "", modelVersion: "", id: "" });
  });

  test("a well-formed request within the bounds passes, packed or not", () => {
    const packed = bytes(str(1, "relu"), param("priority"), input("x", packedShape(8), param("p"), packedFp32(8)));
    expect(() => checkInferRequest(packed, BOUNDS)).not.toThrow();
    // The same 8 floats unpacked (wire type 5 each) and the shape as one varint field.
    const loose = bytes(
      str(1, "relu"),
      input("x", [...tag(3, 0), 8], len(5, Array.from({ length: 8 }, (_, i) => [...tag(6, 5), ...f32(i)]).flat())),
    );
    expect(() => checkInferRequest(loose, BOUNDS)).not.toThrow();
    // Raw contents: one entry per input, the bytes skipped by their length.
    const raw = bytes(str(1, "relu"), input("x", packedShape(8)), len(7, new Array(32).fill(0)));
    expect(() => checkInferRequest(raw, BOUNDS)).not.toThrow();
  });

  test("more typed elements than the named input holds are refused before decoding", () => {
    const e = refusal(() =>
      checkInferRequest(bytes(str(1, "relu"), input("x", packedShape(9), packedFp32(9))), BOUNDS)
    );
    expect(e.message).toBe(
      'Cannot read input "x": its contents hold 9 elements, more than the 8 the model\'s input takes',
    );
    // Unpacked elements count one each; bytes_contents entries count too.
    const bools = len(5, Array.from({ length: 9 }, () => [...tag(1, 0), 1]).flat());
    expect(refusal(() => checkInferRequest(bytes(input("x", bools)), BOUNDS)).message).toContain("hold 9 elements");
    const blobs = len(5, Array.from({ length: 9 }, () => len(8, [])).flat());
    expect(refusal(() => checkInferRequest(bytes(input("x", blobs)), BOUNDS)).message).toContain("hold 9 elements");
  });

  test("inputs, raw entries and requested outputs past the bounds are refused", () => {
    const many = bytes(...Array.from({ length: 18 }, () => input("x")));
    expect(refusal(() => checkInferRequest(many, BOUNDS)).message).toBe(
      "Cannot read the request: it has 18 inputs, more than the model's inputs allow",
    );
    // 17 (the model's one input and 16 more) still reach the planner, which names the input given twice.
    expect(() => checkInferRequest(bytes(...Array.from({ length: 17 }, () => input("x"))), BOUNDS)).not.toThrow();
    const raws = bytes(input("x"), ...Array.from({ length: 18 }, () => len(7, [])));
    expect(refusal(() => checkInferRequest(raws, BOUNDS)).message).toBe(
      "Cannot read the request: raw_input_contents has 18 entries for 1 inputs",
    );
    const outs = bytes(input("x"), ...Array.from({ length: 257 }, () => len(6, str(1, "y"))));
    expect(refusal(() => checkInferRequest(outs, BOUNDS)).message).toBe(
      "Cannot read the request: 257 requested outputs is over the limit of 256",
    );
  });

  test("at most 64 parameters per map, and a rank of at most 32", () => {
    const params = (n: number) => bytes(...Array.from({ length: n }, (_, i) => param(`k${i}`)));
    expect(() => checkInferRequest(params(64), BOUNDS)).not.toThrow();
    expect(refusal(() => checkInferRequest(params(65), BOUNDS)).message).toBe(
      "Cannot read the request: it has more than 64 parameters",
    );
    const tensorParams = bytes(input("x", ...Array.from({ length: 65 }, (_, i) => param(`k${i}`))));
    expect(refusal(() => checkInferRequest(tensorParams, BOUNDS)).message).toBe(
      "Cannot read inputs[0]: it has more than 64 parameters",
    );
    const rank = (r: number) => bytes(input("x", packedShape(...new Array(r).fill(1))));
    expect(() => checkInferRequest(rank(32), BOUNDS)).not.toThrow();
    expect(refusal(() => checkInferRequest(rank(33), BOUNDS)).message).toBe(
      'Cannot read input "x": rank 33 is over 32',
    );
  });

  test("a truncated or malformed message is refused, never read as far as its bytes go", () => {
    const cases: Array<[string, Uint8Array, string]> = [
      ["a name longer than the message", bytes([0x0a, 0x10, 0x72]), "runs past the end of its message"],
      ["a varint of 11 bytes", bytes(tag(9, 0), new Array(10).fill(0x80), [0]), "longer than 10 bytes"],
      ["a group (wire type 3)", bytes(tag(9, 3)), "field 9 has wire type 3"],
      ["model_name as a varint", bytes(tag(1, 0), [1]), "model_name has wire type 0"],
      ["fp32_contents of 5 bytes", bytes(input("x", len(5, len(6, [0, 0, 0, 0, 0])))), "not a multiple of 4"],
      ["a packed shape ending inside a varint", bytes(input("x", len(3, [0x80]))), "ends inside a varint"],
      ["an input cut short", bytes(len(5, [...tag(1, 2), 9, 0x78])), "runs past the end of its message"],
      ["field number 0", bytes([0x02, 0x00]), "field number 0 is out of range"],
    ];
    for (const [what, buf, detail] of cases) {
      const e = refusal(() => checkInferRequest(buf, BOUNDS));
      expect([what, e.message]).toEqual([
        what,
        expect.stringContaining("Cannot read the request: the message is not a well-formed ModelInferRequest ("),
      ]);
      expect([what, e.message]).toEqual([what, expect.stringContaining(detail)]);
    }
    expect(refusal(() => readInferHead(bytes([0x0a, 0x10, 0x72]))).message).toContain("runs past the end");
  });

  test("checkFraming() refuses a flat message whose field runs past its end, naming its type", () => {
    expect(() => checkFraming(bytes(str(1, "relu"), str(2, "1")), "ModelReadyRequest")).not.toThrow();
    expect(refusal(() => checkFraming(bytes([0x0a, 0x05, 0x72]), "ModelReadyRequest")).message).toBe(
      "Cannot read the request: the message is not a well-formed ModelReadyRequest (field 1 runs past the end of its message)",
    );
  });
});
