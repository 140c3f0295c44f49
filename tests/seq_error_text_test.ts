/**
 * `v2_infer_error_get_sequencer_error_text` (seed lifecycle-error-model §4.5: "renders the SEQ-specific text for the
 * FATAL (0x0a) sequencer subtype"). The table is ours (the seed does not give it); the error ids are the seed's
 * literals: 0x0a FATAL, 0x09 NONFATAL.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { sequencerErrorText } from "../packages/core/notification/notification_consume.ts";
import { exec, harness, load, opened, RELU_NEFF } from "./_fault_harness.ts";

afterAll(async () => {
  for (const p of opened.splice(0)) await p.close();
});

describe("the SEQ-specific error text of a FATAL (0x0a) record", () => {
  test("a FATAL record names its sequencer-detected causes; NONFATAL and Q7-only masks have none", () => {
    expect(sequencerErrorText(0x0a, 0x10)).toBe("sequencer fatal error: undecodable instruction slot");
    expect(sequencerErrorText(0x0a, 0x10 | 0x40)).toBe(
      "sequencer fatal error: undecodable instruction slot; opcode missing from the opcode table",
    );
    expect(sequencerErrorText(0x0a, 0x200)).toBe("sequencer fatal error: bad LOAD_POOL_ARGUMENT table");
    expect(sequencerErrorText(0x09, 0x10)).toBeUndefined(); // NONFATAL: no SEQ text
    expect(sequencerErrorText(0x0a, 0x2)).toBeUndefined(); // a Q7 OOB is not a sequencer cause
  });

  test("the FATAL-RT line of a sequencer fault carries the SEQ text", async () => {
    const h = await harness({ visibleCores: [0] });
    try {
      const l = await load(h.rt, RELU_NEFF, 0);
      h.sim.faults.inject({ kind: "tpb-error", mask: 0x10, nc: 0, atExecution: 1 });
      expect(await exec(l)).toBe(6);
      expect(
        h.log.messages().some((m) =>
          m.startsWith("(FATAL-RT-UNDEFINED-STATE) [ND 0][NC 0] TPB_ERROR error_id 0x0a") &&
          m.includes("[sequencer fatal error: undecodable instruction slot]")
        ),
      ).toBe(true);
      h.sim.faults.inject({ kind: "fp-nan", nc: 0, atExecution: 1 });
      expect(await exec(l)).toBe(1003);
      expect(
        h.log.messages().filter((m) => m.includes("error_id 0x09")).every((m) => !m.includes("sequencer fatal error")),
      ).toBe(true);
    } finally {
      await h.rt.close();
    }
  }, 30_000);
});
