/**
 * The Worker entry of a device agent (`device_agent.ts`): the first message is the agent's {@linkcode AgentInit};
 * every later one is an {@linkcode AgentMessage}, answered with an {@linkcode AgentReply}. The agent's Q7 clusters are
 * Workers of this Worker. Ours.
 *
 * @module
 */
import { type AgentInit, type AgentMessage, type AgentReply, DeviceAgent } from "./device_agent.ts";
import { defaultQ7Factory } from "./q7_factory.ts";

interface WorkerScope {
  onmessage: ((e: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
  close(): void;
}

const scope = globalThis as unknown as WorkerScope;
let agent: DeviceAgent | undefined;

scope.onmessage = (e: MessageEvent) => {
  if (agent === undefined) {
    agent = new DeviceAgent(e.data as AgentInit, defaultQ7Factory);
    scope.postMessage({ re: 0 } satisfies AgentReply);
    return;
  }
  const msg = e.data as AgentMessage;
  agent.handle(msg, (r) => {
    scope.postMessage(r);
    if (msg.t === "close") scope.close();
  });
};
