/**
 * `nrt devices [--arch A] [--json]` (ours): the devices the portal reports — generation, NeuronCores, HBM, SBUF, Q7 cores —
 * for the embedded simulator (the arch comes from `--arch`, then `NRT_ARCH`, then Cayman).
 *
 * @module
 */
import { envFromProcess, resolveRuntimeConfig } from "@nrt/core";
import { type CommandSpec, formatHelp, parseCommandArgs } from "./command_args.ts";
import { ArchPackToken, createNrtContainer, PortalToken } from "./container.ts";

/** How `nrt devices` is called. */
export const DEVICES_COMMAND = {
  name: "devices",
  usage: "nrt devices [--arch A] [--json]",
  summary: "List the (simulated) devices: generation, NeuronCores, memory.",
  options: {
    arch: {
      type: "string",
      value: "A",
      description:
        "the generation to simulate: a pack name or instance family such as cayman or trn2 (default: NRT_ARCH, else cayman)",
    },
    json: { type: "boolean", description: 'print one JSON document, {"devices": [...]}' },
  },
  positionals: { min: 0, max: 0, name: "arguments" },
} as const satisfies CommandSpec;

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
  const config = resolveRuntimeConfig(arch === undefined ? {} : { arch }, envFromProcess());
  const c = createNrtContainer({ arch: config.arch });
  const portal = c.resolve(PortalToken);
  try {
    const packs = c.resolveAll(ArchPackToken);
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

/**
 * `nrt devices`: prints one line per device, or with `--json` one JSON document.
 *
 * @param args The arguments after `devices`.
 * @param log Where the listing goes.
 * @returns 0.
 * @throws {UsageError} For an unknown option, `--arch` without a value, or an argument.
 * @throws {NrtError} `NRT_INVALID` when `--arch` names no generation.
 */
export async function runDevices(args: readonly string[], log: (s: string) => void = console.log): Promise<number> {
  const { help, values } = parseCommandArgs(DEVICES_COMMAND, args);
  if (help) {
    log(formatHelp(DEVICES_COMMAND));
    return 0;
  }
  const rows = await listDevices(values.arch);
  if (values.json === true) {
    log(JSON.stringify({ devices: rows }));
    return 0;
  }
  for (const r of rows) {
    // A generation without an instance family (Mariana: the seeds name none) shows the generation alone.
    const kind = [r.generation, r.instances.join("/")].filter((s) => s !== "").join(", ");
    log(
      `nd${r.device}  ${r.arch} (${kind})  ${r.neuronCores} NeuronCores × ${r.q7CoresPerNc} Q7  ` +
        `HBM ${(r.hbmBytes / GiB).toFixed(0)} GiB  SBUF ${
          (r.sbufBytesPerCore / 2 ** 20).toFixed(0)
        } MiB/core  LNC ${r.virtualCoreSize}  [${r.portal}]`,
    );
  }
  return 0;
}
