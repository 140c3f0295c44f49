/**
 * The per-start admin token of `nrt serve --admin` (docs/security.md): 32 random bytes in base64url, printed once
 * and written to a file only its owner can read (mode 0600), which the server removes at its shutdown. With
 * `--admin-token-file FILE` an operator chooses the file: an existing one (owned by this user, not readable by group
 * or others) supplies the token, a missing one is created with a new token; either way the file is the operator's
 * secret across starts, so the server never prints that token and never removes the file. Ours.
 *
 * @module
 */
import { chmod, lstat, mkdir, open, readFile, rm, unlink } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";

/** A new token: 32 random bytes, base64url (43 characters). */
export function newAdminToken(): string {
  const b = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...b)).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

/** The default token file for a server on `port`: under `$XDG_RUNTIME_DIR/nrt`, else `~/.nrt`. */
export function defaultAdminTokenFile(port: number, env: Record<string, string | undefined> = process.env): string {
  const base = env.XDG_RUNTIME_DIR !== undefined && env.XDG_RUNTIME_DIR !== ""
    ? join(env.XDG_RUNTIME_DIR, "nrt")
    : join(homedir(), ".nrt");
  return join(base, `admin-token-${port}`);
}

const uid = (): number | undefined => (typeof process.getuid === "function" ? process.getuid() : undefined);

/** Refuses a token file another user owns or that group or others can read. */
async function checkPrivate(file: string): Promise<void> {
  const st = await lstat(file);
  if (!st.isFile()) throw new Error(`Cannot use admin token file ${file}: it is not a regular file`);
  const me = uid();
  if (me !== undefined && st.uid !== me) {
    throw new Error(`Cannot use admin token file ${file}: it belongs to uid ${st.uid}, not to this user (${me})`);
  }
  if ((st.mode & 0o077) !== 0) {
    throw new Error(
      `Cannot use admin token file ${file}: its mode ${(st.mode & 0o777).toString(8)} lets others read it; use 600`,
    );
  }
}

/**
 * The token in `file` when it exists (and is private to this user), otherwise a new one written there with mode
 * 0600 (its folder, when created, 0700): `--admin-token-file`.
 *
 * @param file The token file.
 * @returns The token and whether it was created now.
 * @throws {Error} When the file is not private, does not hold one token, or cannot be written.
 */
export async function adminToken(file: string): Promise<{ token: string; created: boolean }> {
  try {
    await checkPrivate(file);
    const token = (await readFile(file, "utf8")).trim();
    if (!/^[!-~]{16,512}$/.test(token)) {
      throw new Error(`Cannot use admin token file ${file}: it must hold one token of 16 to 512 printable characters`);
    }
    return { token, created: false };
  } catch (e) {
    if ((e as { code?: string }).code !== "ENOENT") throw e;
  }
  const token = newAdminToken();
  await writeAdminToken(file, token);
  return { token, created: true };
}

/**
 * Writes `token` to `file` with mode 0600, replacing what is there (the default file of `--admin`, one per start).
 * The file is created exclusively after the old one is removed, so a link planted at the path is never followed.
 */
export async function writeAdminToken(file: string, token: string): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await rm(file, { force: true });
  const fh = await open(file, "wx", 0o600);
  try {
    await fh.writeFile(`${token}\n`);
  } finally {
    await fh.close();
  }
  await chmod(file, 0o600);
}

/**
 * Removes the token file a start wrote (the default file of `--admin`), at its shutdown: only when it is still the
 * regular file holding `token`, so a file someone put there since is left alone. A file already gone is no error.
 *
 * @param file The token file.
 * @param token The token the start wrote there.
 * @returns Whether the file was removed.
 */
export async function removeAdminToken(file: string, token: string): Promise<boolean> {
  try {
    if (!(await lstat(file)).isFile() || (await readFile(file, "utf8")).trim() !== token) return false;
    await unlink(file);
    return true;
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") return false;
    throw e;
  }
}
