/**
 * The error-record decoders of the three packs as table tests: every error_id 0..255 × a sweep of masks against
 * the seed's `v2_error_get_infer_error_subtype` (lifecycle-error-model §4.5), plus the 12-entry text tables.
 */
import { describe, expect, test } from "bun:test";
import {
  cayman,
  CAYMAN_DEFAULT_ISA_ERROR_TEXT,
  CAYMAN_ERROR_SUBTYPES,
  CAYMAN_ISA_ERRORS,
  CAYMAN_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
} from "@nrt/arch-cayman";
import {
  mariana,
  MARIANA_DEFAULT_ISA_ERROR_TEXT,
  MARIANA_ERROR_SUBTYPES,
  MARIANA_ISA_ERRORS,
  MARIANA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
} from "@nrt/arch-mariana";
import {
  sunda,
  SUNDA_DEFAULT_ISA_ERROR_TEXT,
  SUNDA_ERROR_SUBTYPES,
  SUNDA_ISA_ERRORS,
  SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
} from "@nrt/arch-sunda";
import type { Khal } from "@nrt/core/hal";
import { NotificationKind, notificationWord } from "@nrt/core/isa";
import { createKhal } from "@nrt/core/hal";

interface Pack {
  readonly khal: string;
  readonly make: () => Khal;
  readonly dveMask: number;
  readonly maskName: string;
  readonly subtypes: readonly number[];
  readonly texts: readonly string[];
  readonly fallback: string;
}

const PACKS: readonly Pack[] = [
  {
    khal: "SundaKhal",
    make: () => createKhal(sunda),
    dveMask: SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
    maskName: "SUNDA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK",
    subtypes: SUNDA_ERROR_SUBTYPES,
    texts: SUNDA_ISA_ERRORS,
    fallback: SUNDA_DEFAULT_ISA_ERROR_TEXT,
  },
  {
    khal: "CaymanKhal",
    make: () => createKhal(cayman),
    dveMask: CAYMAN_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
    maskName: "CAYMAN_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK",
    subtypes: CAYMAN_ERROR_SUBTYPES,
    texts: CAYMAN_ISA_ERRORS,
    fallback: CAYMAN_DEFAULT_ISA_ERROR_TEXT,
  },
  {
    khal: "MarianaKhal",
    make: () => createKhal(mariana),
    dveMask: MARIANA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK,
    maskName: "MARIANA_NOTIFICATION_DVE_SPRUIOUS_ERROR_MASK",
    subtypes: MARIANA_ERROR_SUBTYPES,
    texts: MARIANA_ISA_ERRORS,
    fallback: MARIANA_DEFAULT_ISA_ERROR_TEXT,
  },
];

/** The mask sweep: zero, all ones, every single bit, the seed's constants and their complements, some mixtures. */
const MASKS: readonly number[] = [
  ...new Set([
    0x0000,
    0xffff,
    ...Array.from({ length: 16 }, (_, b) => 1 << b),
    0xfd6b,
    ~0xfd6b & 0xffff,
    0x7e00,
    ~0x7e00 & 0xffff,
    0x0081,
    0x0180,
    0x0380,
    0x7e81,
    0x7f80,
    0x7f81,
    0x8000,
    0x8081,
    0x0294,
    0x1234,
    0xabcd,
    0x5a5a,
    0xa5a5,
  ]),
];

const word = (errorId: number, mask: number): bigint => BigInt(errorId) | (BigInt(mask) << 8n);

/** The seed's `v2_error_get_infer_error_subtype`, restated from lifecycle-error-model §4.5 for one pack's data. */
function seedDecoder(p: Pack, rec: bigint): number {
  const errorId = Number(rec & 0xffn);
  const mask = Number((rec >> 8n) & 0xffffn); // uint16_t mask = rec >> 8
  if (errorId > 0x0b) return 0;
  if (errorId === 4) return (mask & 0xfd6b) !== 0 ? 3 : 2;
  if (errorId === 1) return (mask & ~(p.dveMask | 0x7e00) & 0xffff) !== 0 ? 1 : 0;
  return p.subtypes[errorId];
}

for (const p of PACKS) {
  describe(`${p.khal} error tables (seed lifecycle-error-model §4.5)`, () => {
    const khal = p.make();

    test(`${p.khal}.errorSubtype() returns 0 for every error_id above 11`, () => {
      for (let id = 12; id < 256; id++) for (const m of MASKS) expect(khal.errorSubtype(word(id, m))).toBe(0);
    });

    test(`${p.khal}.errorSubtype() decodes error_id 4 as 3 when mask & 0xfd6b, else 2`, () => {
      const rows = MASKS.map((m) => [m, khal.errorSubtype(word(4, m))]);
      expect(rows).toEqual(MASKS.map((m) => [m, (m & 0xfd6b) !== 0 ? 3 : 2]));
      expect(khal.errorSubtype(word(4, 0x0294))).toBe(2); // every bit outside 0xfd6b
      expect(khal.errorSubtype(word(4, 0x8000))).toBe(3);
    });

    test(`${p.khal}.errorSubtype() decodes error_id 1 through ${p.maskName} | 0x7e00`, () => {
      expect(khal.errorSubtype(word(1, 0))).toBe(0);
      expect(khal.errorSubtype(word(1, p.dveMask))).toBe(0);
      expect(khal.errorSubtype(word(1, p.dveMask | 0x7e00))).toBe(0);
      expect(khal.errorSubtype(word(1, 0x8000))).toBe(1);
      expect(khal.errorSubtype(word(1, 0xffff))).toBe(1);
      for (let b = 0; b < 16; b++) {
        const spurious = ((p.dveMask | 0x7e00) & (1 << b)) !== 0;
        expect([b, khal.errorSubtype(word(1, 1 << b))]).toEqual([b, spurious ? 0 : 1]);
      }
    });

    test(`${p.khal}.errorSubtype() matches the seed's decoder for every error_id 0..255 × the mask sweep`, () => {
      let rows = 0;
      for (let id = 0; id < 256; id++) {
        for (const m of MASKS) {
          expect(khal.errorSubtype(word(id, m))).toBe(seedDecoder(p, word(id, m)));
          rows++;
        }
      }
      expect(rows).toBe(256 * MASKS.length);
    });

    test(`${p.khal}.errorSubtype() reads only the low 24 bits of the record`, () => {
      for (const id of [0, 1, 4, 9, 10, 11, 12]) {
        for (const m of [0, 0x0100, 0x8001]) {
          const rec = notificationWord({
            code: id,
            mask: m,
            engine: 2,
            q7: 7,
            kind: NotificationKind.TPB_ERROR,
            model: 0x1234,
            value: 0xdead,
            aux: 0,
          });
          expect(khal.errorSubtype(rec)).toBe(khal.errorSubtype(word(id, m)));
        }
      }
    });

    test(`${p.khal}.errorSubtype() returns the 12-entry table for the ids without a branch`, () => {
      expect(p.subtypes.length).toBe(12);
      for (const id of [0, 2, 3, 5, 6, 7, 8, 9, 10, 11]) {
        expect(khal.errorSubtype(word(id, 0xffff))).toBe(p.subtypes[id]);
      }
    });

    test(`${p.khal}.isaErrorText() returns the 12-entry table and the default above 11`, () => {
      expect(p.texts.length).toBe(12);
      for (let id = 0; id < 12; id++) expect(khal.isaErrorText(id)).toBe(p.texts[id]);
      for (let id = 12; id < 256; id++) expect(khal.isaErrorText(id)).toBe(p.fallback);
      expect(p.texts).not.toContain(p.fallback);
    });
  });
}

describe("per-arch error tables", () => {
  test("the error_id 1 branch differs per arch exactly where the DVE-spurious masks differ", () => {
    const [s, c, m] = PACKS.map((p) => p.make());
    const rows = [0x0001, 0x0080, 0x0100, 0x0200, 0x0400].map((
      mask,
    ) => [mask, ...[s, c, m].map((k) => k.errorSubtype(word(1, mask)))]);
    expect(rows).toEqual([
      [0x0001, 0, 1, 1], // Sunda's mask 0x0081 has bit 0
      [0x0080, 0, 0, 0], // every mask has bit 7
      [0x0100, 1, 0, 0], // Cayman 0x0180 and Mariana 0x0380 have bit 8
      [0x0200, 0, 0, 0], // bit 9 is in the seed's literal 0x7e00
      [0x0400, 0, 0, 0],
    ]);
  });

  test("the documented mask values and subtype tables are pinned", () => {
    expect(PACKS.map((p) => p.dveMask)).toEqual([0x0081, 0x0180, 0x0380]);
    expect(SUNDA_ERROR_SUBTYPES).toEqual([0, 0, 4, 5, 2, 6, 7, 8, 9, 10, 11, 12]);
    expect(CAYMAN_ERROR_SUBTYPES).toEqual([0, 1, 4, 5, 2, 6, 7, 8, 9, 10, 11, 12]);
    expect(MARIANA_ERROR_SUBTYPES).toEqual([0, 0, 4, 5, 2, 6, 7, 8, 9, 10, 11, 13]);
  });
});
