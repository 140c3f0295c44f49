/** The variables the `nrt` command's Bun process starts with, and their values (bun_env.mjs). */
export declare const BUN_ENV_DEFAULTS: Readonly<{ MIMALLOC_PURGE_DELAY: string }>;
/** `env` with {@linkcode BUN_ENV_DEFAULTS} added where it has no value of its own (a new object). */
export declare function bunEnv(env: Record<string, string | undefined>): Record<string, string | undefined>;
