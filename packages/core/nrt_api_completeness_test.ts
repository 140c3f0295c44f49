import { describe, expect, test } from "bun:test";
import * as root from "./mod.ts";
import { NrtApi } from "./nrt_api.ts";

describe("the nrt_* facade", () => {
  test("every NrtApi method has a module-level function of the same name on the default instance, exported at the root", () => {
    const methods = Object.getOwnPropertyNames(NrtApi.prototype).filter((n) => /^nrta?_/.test(n)).sort();
    expect(methods.length).toBeGreaterThanOrEqual(39);
    const exported = root as unknown as Record<string, unknown>;
    expect(methods.filter((m) => typeof exported[m] !== "function")).toEqual([]);
  });

  test("nrt_get_status_as_str and nrt_get_status_priority are there too", () => {
    expect(root.nrt_get_status_as_str(99_999)).toBe("Unknown status 99999");
    expect(root.nrt_get_status_as_str(5)).not.toBe("Unknown status 5");
    expect(typeof root.nrt_get_status_priority).toBe("function");
  });
});
