/**
 * The byte link between a {@linkcode RemotePortal} and a {@linkcode DeviceDaemon}: an injected transport, so the
 * protocol code stays platform-free. A composition root adapts a Unix socket or a loopback TCP connection
 * (`@nrt/cli`'s `transports.ts`); tests use {@linkcode linkPair}.
 *
 * @module
 */

/** What a transport reports to the protocol side. */
export interface LinkEvents {
  /** Bytes arrived (any cut; the receiver reassembles frames). The chunk may be reused after the call returns. */
  data(chunk: Uint8Array): void;
  /** The link closed (peer closed, process died, or a local `close()`); called once. */
  closed(reason?: unknown): void;
}

/** The sending half of a byte link. */
export interface Link {
  /** Queues bytes for the peer, in order; the transport owns flow control. Ignored after close. */
  send(bytes: Uint8Array): void;
  /**
   * Closes the link after writing what was sent before (a transport may give up on a peer that does not read);
   * `LinkEvents.closed` follows. Idempotent.
   */
  close(): void;
  /**
   * Bytes sent and not yet taken by the transport (a peer that does not read its answers makes it grow). A link
   * without the method reports nothing (the in-memory pair delivers at once).
   */
  queued?(): number;
}

/** Opens a link to a daemon, delivering its events to `events`. */
export type Dialer = (events: LinkEvents) => Promise<Link>;

/**
 * Two links wired back to back in memory, delivering on a microtask (as a socket would, never re-entrantly).
 *
 * @returns A function that connects a client to the server side `accept`.
 *
 * @example Connect a RemotePortal to an in-process daemon
 * ```ts ignore
 * const dial = linkPair((link) => daemon.accept(link));
 * const portal = await RemotePortal.connect(dial, { pid: 1, name: "test" });
 * ```
 */
export function linkPair(accept: (link: Link) => LinkEvents): Dialer {
  return (clientEvents: LinkEvents) => {
    let open = true, closing = false;
    // deno-lint-ignore prefer-const -- assigned once the peer is wired; read lazily
    let serverEvents: LinkEvents | undefined;
    // Queued behind the deliveries already queued (microtasks run in order), so what was sent before arrives first.
    const closeBoth = (reason?: unknown) => {
      if (closing) return;
      closing = true;
      queueMicrotask(() => {
        open = false;
        clientEvents.closed(reason);
        serverEvents?.closed(reason);
      });
    };
    const serverLink: Link = {
      send: (bytes) => {
        if (closing) return;
        const copy = bytes.slice();
        queueMicrotask(() => open && clientEvents.data(copy));
      },
      close: () => closeBoth(),
    };
    serverEvents = accept(serverLink);
    const clientLink: Link = {
      send: (bytes) => {
        if (closing) return;
        const copy = bytes.slice();
        queueMicrotask(() => open && serverEvents!.data(copy));
      },
      close: () => closeBoth(),
    };
    return Promise.resolve(clientLink);
  };
}
