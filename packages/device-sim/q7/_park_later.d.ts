/**
 * Types of _park_later.js.
 *
 * @module
 */

/** Returns a function that schedules `park` once, in a later task. */
export function parkLater(park: () => void): () => void;
