/**
 * The device side of the per-core ucode words `tdrv_destroy` writes for each of a NeuronCore's 13 cores (5 NX, then
 * 8 Q7): `ucode_core_print_logs` moves the core's pending kernel output into the pool_stdio rings, where the host
 * drains it to its logger before the core goes; `ucode_core_destroy` stops the core's image and returns its IRAM and
 * DRAM. After the last Q7 core the cluster's Workers stop.
 *
 * Seed: spmd-teardown §6.2 (`if (core) { ucode_core_print_logs(core); ucode_core_destroy(core); }`, 5 NX then 8 Q7,
 * always all 8), §6.3 (`ucode_lib_core_destroy(core); // device-side: stop image, free IRAM/DRAM`), §6.6 (each Q7
 * core's CRT exit runs when its image is unloaded; `customop_cleanup`'s memw has already flushed results).
 *
 * Ours: the register, its command and state values (`UcodeCoreCommand`, `UcodeCoreState` in `@nrt/core/hal`); what
 * "print logs" moves (the core's staged printf entries, since the simulator keeps no other per-core log); NX cores
 * run no kernel code here, so their print is empty and their destroy only marks them stopped; the Q7 Workers stop
 * with the last Q7 core, because the 8 cores are one cluster (the earlier cores' windows are already empty).
 *
 * @module
 */
import { type SiliconSpec, UcodeCoreCommand, UcodeCoreState } from "@nrt/core/hal";
import type { SimNeuronCore } from "./sim_device.ts";

/**
 * Carries out one command written to ucode core word `word` of a NeuronCore. Resolves once its effect is visible
 * (the entries are in the rings; the image is gone); an unknown command is refused.
 */
export async function ucodeCoreWritten(
  unit: SimNeuronCore,
  spec: SiliconSpec,
  word: number,
  command: number,
): Promise<void> {
  const nx = spec.nxCoresPerNc;
  const q7 = word >= nx ? word - nx : undefined;
  switch (command) {
    case UcodeCoreCommand.PRINT_LOGS:
      if (q7 !== undefined) await unit.fileIo.flushCore(q7);
      return;
    case UcodeCoreCommand.DESTROY: {
      if (q7 !== undefined) unit.regs.clearImage(q7);
      unit.regs.setUcodeCoreState(word, UcodeCoreState.STOPPED);
      if (q7 === undefined) return;
      for (let c = 0; c < spec.q7CoresPerNc; c++) {
        if (unit.regs.ucodeCoreState(nx + c) !== UcodeCoreState.STOPPED) return;
      }
      unit.q7.unload("ucode_core_destroy");
      return;
    }
    default:
      throw new Error(
        `Unknown ucode core command ${command} for ${q7 === undefined ? `NX core ${word}` : `Q7 core ${q7}`}`,
      );
  }
}
