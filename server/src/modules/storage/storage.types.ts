import type { Readable } from 'node:stream';

/** A stored file as read back: its bytes as a stream, the content type it was stored with, its size in bytes. */
export interface StoredFile {
  body: Readable;
  contentType: string;
  /** Size of the body in bytes. */
  size: number;
}

/** Which backend a {@link FileStorage} is; `unconfigured` is S3 chosen without its settings. */
/** Uploaded keys are random and never rewritten, so caches may keep them for a year. */
export const IMMUTABLE_CACHE_CONTROL = 'public, max-age=31536000, immutable';

export type StorageKind = 'local' | 's3' | 'unconfigured';

/**
 * Where uploaded files live (ARCHITECTURE "files": the local disk under DATA_DIR, or S3).
 * Keys are `/`-separated relative paths checked by `isValidStorageKey`; an invalid key is never
 * stored and reads as "not found".
 */
export interface FileStorage {
  readonly kind: StorageKind;
  /**
   * Stores `body` under `key` with `contentType`, replacing any file already there.
   * @throws Error for an invalid key (keys are built by the server, so that is a bug);
   *   AppError S3_NOT_CONFIGURED when S3 is chosen but not configured.
   */
  put(key: string, body: Buffer, contentType: string): Promise<void>;
  /** The file under `key`, or undefined when there is none (or the key is invalid). */
  get(key: string): Promise<StoredFile | undefined>;
  /** Deletes the file under `key`; true when there was one, false otherwise. */
  delete(key: string): Promise<boolean>;
  /** The absolute URL where anyone (an email client) can load the file under `key`. */
  publicUrl(key: string): string;
  /** Releases connections and, for a temporary directory, removes it. */
  close(): Promise<void>;
}
