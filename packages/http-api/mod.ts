/**
 * `@nrt/http-api`: not built yet (see the open issues); the package exists so the workspace shape is final.
 *
 * @module
 */
export {};
