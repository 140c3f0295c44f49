/**
 * The Worker entry of a device agent (`device_agent.ts`): the first message is the agent's {@linkcode AgentInit};
 * every later one is an {@linkcode AgentMessage}, answered with an {@linkcode AgentReply}. The agent's Q7 clusters are
 * Workers of this Worker, and the agent runs small ops itself under the watchdog of `local_watchdog.ts`. Ours.
 *
 * @module
 */
import { type AgentInit, type AgentMessage, type AgentReply, DeviceAgent } from "./device_agent.ts";
import { LocalWatchdog } from "./local_watchdog.ts";
import { localOpsQ7Factory } from "./q7_factory.ts";

interface WorkerScope {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;
let agent: DeviceAgent | undefined;
let watchdog: LocalWatchdog | undefined;

scope.onmessage = (e: MessageEvent) => {
  if (agent === undefined) {
    const init = e.data as AgentInit;
    // Small ops run on this thread, under a watchdog Worker that can stop them (local_watchdog.ts).
    watchdog = new LocalWatchdog(init.doorbells);
    agent = new DeviceAgent(init, localOpsQ7Factory(watchdog));
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
