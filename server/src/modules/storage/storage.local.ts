import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { assertValidStorageKey, isValidStorageKey, keyToUrlPath } from './storage.key.ts';
import type { FileStorage, StoredFile } from './storage.types.ts';

const FALLBACK_CONTENT_TYPE = 'application/octet-stream';

export interface LocalDiskStorageOptions {
  /** Directory holding the files (created on first write). */
  root: string;
  /** URL the files are served under, without a trailing slash (e.g. `http://localhost:3000/files`). */
  publicBaseUrl: string;
  /** Remove `root` on close (a temporary directory for `DATA_DIR=memory://`). */
  removeOnClose?: boolean;
}

/**
 * Files on the local disk: `<root>/<key>`, with the content type kept in a sidecar
 * `<dir>/.<name>.meta.json` (keys cannot start a segment with a dot, so a sidecar is never a key).
 * Writes go to a temporary file renamed into place, so a reader never sees half a file.
 */
export class LocalDiskStorage implements FileStorage {
  readonly kind = 'local';
  readonly #root: string;
  readonly #publicBaseUrl: string;
  readonly #removeOnClose: boolean;

  constructor(options: LocalDiskStorageOptions) {
    this.#root = path.resolve(options.root);
    this.#publicBaseUrl = options.publicBaseUrl.replace(/\/+$/, '');
    this.#removeOnClose = options.removeOnClose ?? false;
  }

  /** The directory files are stored under (absolute). */
  get root(): string {
    return this.#root;
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    assertValidStorageKey(key);
    const file = this.#pathOf(key);
    await mkdir(path.dirname(file), { recursive: true });
    const temporary = `${path.dirname(file)}/.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await writeFile(temporary, body);
      await writeFile(metaPathOf(file), JSON.stringify({ contentType }));
      await rename(temporary, file);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
  }

  async get(key: string): Promise<StoredFile | undefined> {
    if (!isValidStorageKey(key)) return undefined;
    const file = this.#pathOf(key);
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(file, 'r');
    } catch (error) {
      if (isMissing(error)) return undefined;
      throw error;
    }
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) {
        await handle.close();
        return undefined;
      }
      const contentType = await readContentType(file);
      return { body: handle.createReadStream(), contentType, size: stats.size };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  async delete(key: string): Promise<boolean> {
    if (!isValidStorageKey(key)) return false;
    const file = this.#pathOf(key);
    try {
      await unlink(file);
    } catch (error) {
      if (isMissing(error) || (error as NodeJS.ErrnoException).code === 'EISDIR') return false;
      throw error;
    }
    await rm(metaPathOf(file), { force: true });
    return true;
  }

  publicUrl(key: string): string {
    return `${this.#publicBaseUrl}/${keyToUrlPath(key)}`;
  }

  async close(): Promise<void> {
    if (this.#removeOnClose) await rm(this.#root, { recursive: true, force: true });
  }

  /** `<root>/<key>`, refusing anything that would resolve outside root (defence in depth over the key rules). */
  #pathOf(key: string): string {
    const file = path.resolve(this.#root, key);
    if (!file.startsWith(`${this.#root}${path.sep}`)) throw new Error(`storage key escapes the root: ${key}`);
    return file;
  }
}

function metaPathOf(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.meta.json`);
}

async function readContentType(file: string): Promise<string> {
  try {
    const meta = JSON.parse(await readFile(metaPathOf(file), 'utf8')) as { contentType?: unknown };
    return typeof meta.contentType === 'string' ? meta.contentType : FALLBACK_CONTENT_TYPE;
  } catch {
    return FALLBACK_CONTENT_TYPE;
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
