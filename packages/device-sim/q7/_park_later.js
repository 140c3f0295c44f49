// @ts-self-types="./_park_later.d.ts"
/**
 * Parking a Worker in a later task: the Q7 Workers and the local-op watchdog block in `Atomics.wait` between their
 * wake-ups, and return to their event loop only to take a message. Bun gotcha (ARCHITECTURE §10): a reply posted in
 * a task that then blocks in `Atomics.wait` is never delivered, so parking always starts in a later task. Ours.
 *
 * @module
 */

/**
 * Returns a function that schedules `park` once, in a later task (calls made before it ran schedule nothing more).
 *
 * @param {() => void} park
 * @returns {() => void}
 */
export function parkLater(park) {
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    setTimeout(() => {
      scheduled = false;
      park();
    }, 0);
  };
}
