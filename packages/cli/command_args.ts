/**
 * Command-line parsing for the `nrt` commands (ours). Each command declares one option table, a
 * {@linkcode CommandSpec}; `node:util` `parseArgs` (which Bun and Deno both ship) splits the arguments by it, and
 * the same table writes the command's `--help`. A mistake is a {@linkcode UsageError} with one message form,
 * `Cannot parse nrt <command> arguments: <why>`, which `nrt` reports on stderr with exit code 2.
 *
 * @module
 */
import { parseArgs } from "node:util";

/** A command-line mistake: `nrt` prints the message and the command's usage line, and exits with 2. */
export class UsageError extends Error {
  /**
   * Creates the error.
   *
   * @param message A sentence-case message saying what could not be done and why.
   * @param options The cause, if another error led to it.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

/** A flag without a value, such as `--json`. */
export interface BooleanOptionSpec {
  /** `boolean`. */
  readonly type: "boolean";
  /** A one-letter alias (`-j` for `j`). */
  readonly short?: string;
  /** What the flag does, for `--help`. */
  readonly description: string;
}

/** An option that takes a value, such as `--arch A` or `--arch=A`. */
export interface StringOptionSpec {
  /** `string`. */
  readonly type: "string";
  /** A one-letter alias (`-o` for `o`). */
  readonly short?: string;
  /** Whether the option may be given more than once; its values are then collected in order. */
  readonly multiple?: boolean;
  /** The value's placeholder in the usage and `--help`, such as `PATH`. */
  readonly value: string;
  /** What the option does, for `--help`. */
  readonly description: string;
}

/** One option of a command. */
export type OptionSpec = BooleanOptionSpec | StringOptionSpec;

/** The options of a command, by long name (without `--`). */
export type OptionTable = Readonly<Record<string, OptionSpec>>;

/** How a command is called: its name, usage line, summary, options and positional arguments. */
export interface CommandSpec<O extends OptionTable = OptionTable> {
  /** The command's name, such as `devices`. */
  readonly name: string;
  /** The usage line without `Usage: `, such as `nrt devices [--arch A] [--json]`. */
  readonly usage: string;
  /** One or two sentences on what the command does. */
  readonly summary: string;
  /** The options; `-h`/`--help` is added to every command. */
  readonly options: O;
  /** How many positional arguments the command takes, and their name in messages (`FILE`). */
  readonly positionals: { readonly min: number; readonly max: number; readonly name: string };
}

/** The value type of one option: `boolean`, `string`, or `string[]` for a `multiple` option. */
export type OptionValue<S extends OptionSpec> = S extends { readonly type: "string"; readonly multiple: true }
  ? string[]
  : S extends StringOptionSpec ? string
  : boolean;

/** The parsed options: each present one with its value, absent ones `undefined`. */
export type OptionValues<O extends OptionTable> = { readonly [K in keyof O]?: OptionValue<O[K]> };

/** What {@linkcode parseCommandArgs} found. */
export interface ParsedCommand<O extends OptionTable> {
  /** `-h` or `--help` was given: the caller prints {@linkcode formatHelp} and exits with 0, ignoring the rest. */
  readonly help: boolean;
  /** The options. */
  readonly values: OptionValues<O>;
  /** The positional arguments, in order. */
  readonly positionals: readonly string[];
}

const HELP: BooleanOptionSpec = { type: "boolean", short: "h", description: "print this help" };

/** The `Cannot parse nrt <command> arguments: <why>` error. */
export function usageError(spec: CommandSpec, why: string): UsageError {
  return new UsageError(`Cannot parse nrt ${spec.name} arguments: ${why}`);
}

/**
 * Parses a command's arguments by its option table.
 *
 * A value may follow its option (`--arch cayman`) or be joined to it (`--arch=cayman`, `-ofile`); an argument that
 * starts with `--` is never taken as a value, so `--arch --json` is a missing value, not an architecture named
 * `--json`. A lone `--` ends the options. An option given twice keeps its last value unless it is `multiple`.
 *
 * @param spec The command.
 * @param args The arguments after the command's name.
 * @returns The options and positionals; only `help` is meaningful when `help` is true.
 * @throws {UsageError} For an unknown option, a missing value, a value given to a flag, or too few or too many
 * positional arguments.
 *
 * @example Parse `nrt devices` arguments
 * ```ts
 * import { parseCommandArgs } from "./command_args.ts";
 * const spec = {
 *   name: "devices", usage: "nrt devices [--arch A] [--json]", summary: "List the devices.",
 *   options: {
 *     arch: { type: "string", value: "A", description: "the generation" },
 *     json: { type: "boolean", description: "print JSON" },
 *   },
 *   positionals: { min: 0, max: 0, name: "" },
 * } as const;
 * const { values } = parseCommandArgs(spec, ["--arch", "sunda", "--json"]);
 * console.log(values.arch, values.json); // "sunda" true
 * ```
 */
export function parseCommandArgs<const O extends OptionTable>(
  spec: CommandSpec<O>,
  args: readonly string[],
): ParsedCommand<O> {
  const table: Record<string, OptionSpec> = { ...spec.options, help: HELP };
  const config = parseArgsOptions(table);
  // Not strict: the tokens let the messages below name the argument exactly as the user typed it, on both runtimes.
  const { values, positionals, tokens } = parseArgs({
    args: [...args],
    options: config,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  if (tokens.some((t) => t.kind === "option" && t.name === "help")) return { help: true, values: {}, positionals: [] };
  for (const t of tokens) {
    if (t.kind !== "option") continue;
    const o = Object.hasOwn(table, t.name) ? table[t.name] : undefined;
    if (o === undefined) throw usageError(spec, `unknown option ${t.rawName}`);
    if (o.type === "boolean" && t.value !== undefined) throw usageError(spec, `${t.rawName} takes no value`);
    if (o.type === "string" && (t.value === undefined || (!t.inlineValue && t.value.startsWith("--")))) {
      throw usageError(spec, `${t.rawName} needs a value`);
    }
  }
  const p = spec.positionals;
  if (positionals.length < p.min) throw usageError(spec, `${p.name} is missing`);
  if (positionals.length > p.max) {
    throw usageError(
      spec,
      `unexpected argument "${positionals[p.max]}"${
        p.max === 0 ? ` (nrt ${spec.name} takes no ${p.name || "arguments"})` : ""
      }`,
    );
  }
  return { help: false, values: values as OptionValues<O>, positionals };
}

/** One option as `node:util` `parseArgs` takes it. */
export interface ParseArgsOption {
  /** `string` or `boolean`. */
  readonly type: "string" | "boolean";
  /** The one-letter alias. */
  readonly short?: string;
  /** Whether the values are collected. */
  readonly multiple?: boolean;
}

/**
 * The `node:util` `parseArgs` options of an option table: for a command that parses with `parseArgs` on its own
 * terms (`nrt serve`, `nrt compile`: strict, with their own messages) but writes its `--help` from the same table
 * with {@linkcode formatHelp}, so the help cannot miss an option the parser takes.
 *
 * @param options The command's options (without `help`).
 * @returns The `options` argument of `parseArgs`.
 */
export function parseArgsOptions(options: OptionTable): Record<string, ParseArgsOption> {
  const config: Record<string, ParseArgsOption> = {};
  for (const [name, o] of Object.entries(options)) {
    config[name] = {
      type: o.type,
      ...(o.short === undefined ? {} : { short: o.short }),
      ...(o.type === "string" && o.multiple ? { multiple: true } : {}),
    };
  }
  return config;
}

/**
 * Reads an integer option value.
 *
 * @param spec The command, for the message.
 * @param flag The option's name as typed, such as `--port`.
 * @param text The value.
 * @param min The smallest value allowed.
 * @param max The largest value allowed.
 * @returns The integer.
 * @throws {UsageError} When `text` is not a decimal integer from `min` to `max`.
 */
export function parseIntegerOption(spec: CommandSpec, flag: string, text: string, min: number, max: number): number {
  const n = /^[0-9]{1,16}$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw usageError(spec, `${flag} ${text} is not an integer from ${min} to ${max}`);
  }
  return n;
}

/**
 * The command's `--help`: the usage line, the summary and one line per option.
 *
 * @param spec The command.
 * @returns The text, without a trailing newline.
 */
export function formatHelp(spec: CommandSpec): string {
  const table: Record<string, OptionSpec> = { ...spec.options, help: HELP };
  const rows = Object.entries(table).map(([name, o]) => {
    const long = `--${name}${o.type === "string" ? ` ${o.value}` : ""}`;
    return [
      o.short === undefined ? `    ${long}` : `-${o.short}, ${long}`,
      o.description + (o.type === "string" && o.multiple ? " (repeatable)" : ""),
    ];
  });
  const width = Math.max(...rows.map(([flag]) => flag.length));
  const lines = rows.map(([flag, text]) => `  ${flag.padEnd(width)}  ${text}`);
  return `Usage: ${spec.usage}\n\n${spec.summary}\n\nOptions:\n${lines.join("\n")}`;
}

/**
 * Whether `args` ask for help (`-h` or `--help` before any `--`), for commands that parse their arguments on their
 * own terms.
 *
 * @param args The arguments after the command's name.
 * @returns `true` when help is asked for.
 */
export function helpRequested(args: readonly string[]): boolean {
  const { tokens } = parseArgs({
    args: [...args],
    options: { help: { type: "boolean", short: "h" } },
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  return tokens.some((t) => t.kind === "option" && t.name === "help");
}
