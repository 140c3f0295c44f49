/**
 * The Worker entry of a device agent (`device_agent.ts`): the first message is the agent's {@linkcode AgentInit};
 * every later one is an {@linkcode AgentMessage}, answered with an {@linkcode AgentReply}. The agent's Q7 clusters and
 * its watchdog run in Workers the host starts for it (worker_spawn.ts: a Worker started by a Worker is slow to start
 * on Deno), each talking to this agent over a port of its own; the host's word about one of them comes as a
 * {@linkcode SpawnError}. The agent runs small ops itself under the watchdog of `local_watchdog.ts`. Ours.
 *
 * @module
 */
import { type AgentInit, type AgentMessage, type AgentReply, DeviceAgent } from "./device_agent.ts";
import { LocalWatchdog } from "./local_watchdog.ts";
import { localOpsQ7Factory } from "./q7_factory.ts";
import { HostSpawner, type SpawnError } from "./worker_spawn.ts";

interface WorkerScope {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;
let agent: DeviceAgent | undefined;
let watchdog: LocalWatchdog | undefined;
const spawner = new HostSpawner((request, transfer) => scope.postMessage(request, transfer));

scope.onmessage = (e: MessageEvent) => {
  if (typeof (e.data as Partial<SpawnError>).spawnError === "number") {
    spawner.failed(e.data as SpawnError);
    return;
  }
  if (agent === undefined) {
    const init = e.data as AgentInit;
    // Small ops run on this thread, under a watchdog Worker that can stop them (local_watchdog.ts).
    watchdog = new LocalWatchdog(init.doorbells, spawner.spawn);
    agent = new DeviceAgent(init, localOpsQ7Factory(watchdog, undefined, spawner.spawn));
    scope.postMessage({ re: 0 } satisfies AgentReply);
    return;
  }
  const msg = e.data as AgentMessage;
  agent.handle(msg, (r) => {
    scope.postMessage(r);
    if (msg.t === "close") {
      watchdog?.stop();
      scope.close();
    }
  });
};
