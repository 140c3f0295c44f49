/**
 * `CoreOwnership`: which process owns which NeuronCore of the daemon's device, granted the way the Neuron driver
 * grants them — exclusive per process, all-or-nothing per request, released when the process closes its device
 * file (here: its connection). The driver's ABI for this is the `crwl` NeuronCore range mark/unmark
 * (`NEURON_IOCTL_CRWL_NC_RANGE_MARK` 85 / `_UNMARK` 86, `struct neuron_ioctl_crwl_nc_map`; see docs/portal-ndl.md).
 *
 * @module
 */
import { NrtError, NrtStatus } from "@nrt/core";

/** The process a NeuronCore is granted to. */
export interface CoreOwner {
  /** Daemon session id (one per connection). */
  readonly session: number;
  /** The client's process id, as it identified itself. */
  readonly pid: number;
  /** The client's name, as it identified itself. */
  readonly name: string;
}

/** One granted NeuronCore. */
export interface CoreGrant {
  /** Device index. */
  readonly device: number;
  /** NeuronCore index on the device. */
  readonly nc: number;
  /** Its owner. */
  readonly owner: CoreOwner;
}

/** Formats `process 4242 ("server-a")`. */
export function describeOwner(o: Pick<CoreOwner, "pid" | "name">): string {
  // The pid and name are what the client declared in HELLO: informational, not verified — no runtime we run on
  // exposes a Unix socket's peer credentials (docs/security.md).
  return `process ${o.pid} (${JSON.stringify(o.name)})`;
}

/**
 * The ownership table.
 *
 * @example Two processes, one core
 * ```ts
 * import { CoreOwnership } from "./core_ownership.ts";
 * const t = new CoreOwnership();
 * t.acquire(0, [0], { session: 1, pid: 100, name: "a" });
 * try {
 *   t.acquire(0, [0, 1], { session: 2, pid: 200, name: "b" });
 * } catch (e) {
 *   console.log((e as Error).message); // names process 100 ("a")
 * }
 * ```
 */
export class CoreOwnership {
  readonly #owners = new Map<string, CoreGrant>();

  /**
   * Grants every core of `cores` on `device` to `owner`, or none of them.
   * Re-acquiring cores the same session already owns is a no-op for those cores.
   *
   * @throws {NrtError} `NRT_RESOURCE` naming the owning process when a core is owned by another session.
   */
  acquire(device: number, cores: readonly number[], owner: CoreOwner): void {
    const busy = cores.map((nc) => this.#owners.get(key(device, nc))).filter((g): g is CoreGrant =>
      g !== undefined && g.owner.session !== owner.session
    );
    if (busy.length > 0) {
      const held = busy.map((g) => `nc${g.nc} is in use by ${describeOwner(g.owner)}`).join("; ");
      throw new NrtError(
        NrtStatus.NRT_RESOURCE,
        `Cannot acquire NeuronCore(s) ${cores.map((c) => `nc${c}`).join(",")} of device ${device} for ${
          describeOwner(owner)
        }: ${held}`,
      );
    }
    for (const nc of cores) this.#owners.set(key(device, nc), { device, nc, owner });
  }

  /**
   * Releases cores `session` owns; cores that are free stay free.
   *
   * @throws {NrtError} `NRT_INVALID` when a core is owned by another session (nothing is released then).
   */
  release(device: number, cores: readonly number[], session: number): void {
    for (const nc of cores) {
      const g = this.#owners.get(key(device, nc));
      if (g !== undefined && g.owner.session !== session) {
        throw new NrtError(
          NrtStatus.NRT_INVALID,
          `Cannot release NeuronCore nc${nc} of device ${device}: it is owned by ${describeOwner(g.owner)}`,
        );
      }
    }
    for (const nc of cores) this.#owners.delete(key(device, nc));
  }

  /** Releases every core of `session` and returns what it held. */
  releaseAll(session: number): CoreGrant[] {
    const held = this.held(session);
    for (const g of held) this.#owners.delete(key(g.device, g.nc));
    return held;
  }

  /** The cores `session` holds. */
  held(session: number): CoreGrant[] {
    return [...this.#owners.values()].filter((g) => g.owner.session === session);
  }

  /** The owner of a core, if any. */
  owner(device: number, nc: number): CoreOwner | undefined {
    return this.#owners.get(key(device, nc))?.owner;
  }

  /** Every grant, by device then core. */
  grants(): CoreGrant[] {
    return [...this.#owners.values()].sort((a, b) => a.device - b.device || a.nc - b.nc);
  }
}

function key(device: number, nc: number): string {
  return `${device}:${nc}`;
}
