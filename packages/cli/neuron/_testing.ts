/**
 * The snapshot the Neuron tool format tests share: two simulated Trn2 (Cayman) devices under a logical NeuronCore
 * config of 2, a tagged runtime on device 0, an untagged idle one on device 1, and a process without the runtime.
 *
 * @module
 */
import { DMA_MEM_USAGE_SLOTS, DmaMemUsageType } from "@nrt/core";
import type { NeuronSnapshot } from "./snapshot.ts";

const GiB = 2 ** 30;

/** A ledger row (23 slots, as `DmemLedger.usage()`) with `bytes` booked per category; the total slot is filled. */
export function usageRow(bytes: Partial<Record<keyof typeof DmaMemUsageType, number>>): Float64Array {
  const row = new Float64Array(DMA_MEM_USAGE_SLOTS);
  for (const [name, n] of Object.entries(bytes)) {
    row[DmaMemUsageType[name as keyof typeof DmaMemUsageType]] = n;
    row[DMA_MEM_USAGE_SLOTS - 1] += n;
  }
  return row;
}

/** A long command, cut by neuron-ls. */
export const LONG_COMMAND =
  "python3 infer.py --model /models/resnet50.neff --batch-size 16 --iterations 100000 --warmup 10";

/** The shared snapshot (period 2 s). */
export function testSnapshot(): NeuronSnapshot {
  return {
    periodSeconds: 2,
    instance: {
      instanceName: "nrt-sim",
      instanceId: "i-0123456789abcdef0",
      instanceType: "trn2.48xlarge",
      availabilityZone: "us-west-2b",
      availabilityZoneId: "usw2-az2",
      region: "us-west-2",
      amiId: "ami-0123456789abcdef0",
      subnetId: "subnet-0123abcd",
    },
    logicalNeuronCoreConfig: 2,
    devices: [
      {
        index: 0,
        archName: "cayman",
        generation: "NC-v3",
        physicalCores: 8,
        hbmBytes: 96 * GiB,
        connectedDevices: [1],
        pciBdf: "0000:cc:00.0",
        cpuAffinity: "0-47,96-143",
        numaNode: 0,
        ecc: { memCorrected: 2, memUncorrected: 1, sramCorrected: 0, sramUncorrected: 3 },
      },
      {
        index: 1,
        archName: "cayman",
        generation: "NC-v3",
        physicalCores: 8,
        hbmBytes: 96 * GiB,
        connectedDevices: [0],
        pciBdf: "0000:b5:00.0",
        cpuAffinity: "0-47,96-143",
        numaNode: 0,
        ecc: { memCorrected: 0, memUncorrected: 0, sramCorrected: 0, sramUncorrected: 0 },
      },
    ],
    runtimes: [
      {
        pid: 4242,
        command: "bun packages/cli/main.ts serve --demo",
        tag: "demo",
        runtimeVersion: "2.31.0",
        cores: [
          {
            index: 0,
            device: 0,
            busySeconds: 0.5,
            physical: [{ index: 0, busySeconds: 0.5 }, { index: 1, busySeconds: 0.25 }],
            memory: usageRow({
              CODE: 1000,
              INSTRUCTIONS: 24,
              UCODE_LIBS: 2048,
              CONSTANTS: 4096,
              TENSORS: 8192,
              SHARED_SCRATCHPAD: 512,
              DMA_RINGS: 256,
              RUNTIME: 128,
            }),
          },
          { index: 1, device: 0, busySeconds: 1, flops: 4e12, memory: usageRow({ TENSORS: 65536 }) },
        ],
        hostMemory: usageRow({ NOTIFICATIONS: 4096, TENSORS: 1024, CODE: 100 }),
        hostApplicationBytes: 5000,
        vcpu: { user: 12.3456, system: 3.21 },
        executions: { 0: 10, 1003: 2, 5: 1, 1201: 1, 7: 3 },
        latency: { total: [0.004, 0.001, 0.002, 0.003], device: [0.0035, 0.0008, 0.0015, 0.0025] },
        models: [{
          name: "vector_add",
          uuid: "00a04c535fd94f07bffdd5eacdefc852",
          modelId: 10001,
          isRunning: true,
          core: 0,
          device: 0,
          memory: usageRow({ CODE: 1000, CONSTANTS: 4096, SHARED_SCRATCHPAD: 512 }),
          hostMemory: usageRow({ CODE: 100 }),
        }],
      },
      {
        pid: 5151,
        command: LONG_COMMAND,
        runtimeVersion: "2.31.0",
        cores: [{ index: 4, device: 1, busySeconds: 0, memory: usageRow({}) }],
        hostMemory: usageRow({}),
        vcpu: { user: 0, system: 0 },
        executions: {},
        latency: { total: [], device: [] },
      },
    ],
    otherProcesses: [{ pid: 9000, command: "neuron-ls --show-all-procs", devices: [0, 1] }],
    system: {
      vcpus: [
        { user: 10, nice: 1, system: 5, idle: 80, ioWait: 2, irq: 1, softIrq: 1 },
        { user: 20, nice: 0, system: 10, idle: 70, ioWait: 0, irq: 0, softIrq: 0 },
      ],
      contextSwitches: 1234,
      memoryTotalBytes: 24 * GiB,
      memoryUsedBytes: 8 * GiB,
      swapTotalBytes: 0,
      swapUsedBytes: 0,
    },
  };
}
