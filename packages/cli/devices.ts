/**
 * `nrt devices [--arch A] [--json]`: the devices the portal reports — generation, NeuronCores, HBM, SBUF, Q7 cores —
 * for the embedded simulator (the arch comes from `--arch`, then `NRT_ARCH`, then Cayman).
 *
 * @module
 */
import { envFromProcess, Khal, Portal, resolveRuntimeConfig } from "@nrt/core";
import { createNrtContainer } from "./container.ts";

/** One row of the listing. */
export interface DeviceRow {
  /** Device index. */
  readonly device: number;
  /** Pack name, e.g. `cayman`. */
  readonly arch: string;
  /** Generation, e.g. `NC-v3`. */
  readonly generation: string;
  /** Instance families. */
  readonly instances: readonly string[];
  /** Physical NeuronCores. */
  readonly neuronCores: number;
  /** HBM bytes. */
  readonly hbmBytes: number;
  /** SBUF bytes per NeuronCore. */
  readonly sbufBytesPerCore: number;
  /** Q7 cores per NeuronCore. */
  readonly q7CoresPerNc: number;
  /** Default logical core size. */
  readonly virtualCoreSize: number;
  /** Portal backend. */
  readonly portal: string;
}

/** Lists the devices of a freshly created container. */
export async function listDevices(arch?: string): Promise<DeviceRow[]> {
  const config = resolveRuntimeConfig(arch === undefined ? {} : { arch: arch as never }, envFromProcess());
  const c = createNrtContainer({ arch: config.arch });
  const portal = c.resolve(Portal);
  try {
    const packs = c.resolveAll(Khal);
    return (await portal.devices()).map((d) => {
      const spec = packs.find((k) => k.spec.arch === d.arch)?.spec;
      return {
        device: d.index,
        arch: spec?.name ?? `arch ${d.arch}`,
        generation: spec?.generation ?? "unknown",
        instances: spec?.instances ?? [],
        neuronCores: d.ncCount,
        hbmBytes: d.hbmBytes,
        sbufBytesPerCore: spec?.sbufBytesPerCore ?? 0,
        q7CoresPerNc: spec?.q7CoresPerNc ?? 0,
        virtualCoreSize: spec?.forcedVirtualCoreSize ?? spec?.defaultVirtualCoreSize ?? 1,
        portal: portal.name,
      };
    });
  } finally {
    await portal.close();
  }
}

const GiB = 1024 ** 3;

/** `nrt devices`: exit 0, or 2 on a usage error. */
export async function runDevices(args: string[], log: (s: string) => void = console.log): Promise<number> {
  const a = args.indexOf("--arch");
  const rows = await listDevices(a >= 0 ? args[a + 1] : undefined);
  if (args.includes("--json")) {
    log(JSON.stringify({ devices: rows }));
    return 0;
  }
  for (const r of rows) {
    log(
      `nd${r.device}  ${r.arch} (${r.generation}, ${r.instances.join("/")})  ${r.neuronCores} NeuronCores × ${r.q7CoresPerNc} Q7  ` +
        `HBM ${(r.hbmBytes / GiB).toFixed(0)} GiB  SBUF ${(r.sbufBytesPerCore / 2 ** 20).toFixed(0)} MiB/core  LNC ${r.virtualCoreSize}  [${r.portal}]`,
    );
  }
  return 0;
}
