// noop: does nothing but commit; the dispatch-latency probe.
import { customop_cleanup } from "./_abi";

export function noop(): void {
  customop_cleanup();
}
