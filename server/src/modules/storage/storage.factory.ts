import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Config } from '../../config.ts';
import { AppError } from '../../http/errors.ts';
import { LocalDiskStorage } from './storage.local.ts';
import type { FileStorage } from './storage.types.ts';

type StorageConfig = Pick<
  Config,
  | 'BASE_URL'
  | 'DATA_DIR'
  | 'STORAGE'
  | 'S3_BUCKET'
  | 'S3_REGION'
  | 'S3_ENDPOINT'
  | 'S3_ACCESS_KEY_ID'
  | 'S3_SECRET_ACCESS_KEY'
  | 'S3_FORCE_PATH_STYLE'
  | 'S3_PUBLIC_URL'
>;

/**
 * The backend the configuration asks for: `STORAGE` when set, else `s3` when `S3_BUCKET` is set,
 * else `local` (issue #4 "Uploads for the builder").
 */
export function storageBackendOf(config: Pick<Config, 'STORAGE' | 'S3_BUCKET'>): 'local' | 's3' {
  return config.STORAGE ?? (config.S3_BUCKET ? 's3' : 'local');
}

/**
 * Builds the configured {@link FileStorage}:
 * - local: `<DATA_DIR>/files`, served at `<BASE_URL>/files/<key>`; with `DATA_DIR=memory://` (tests)
 *   a new temporary directory, removed on close;
 * - s3: bucket `S3_BUCKET` in `S3_REGION` (default us-east-1) at `S3_ENDPOINT` (AWS when unset), path
 *   style by default when an endpoint is set, static credentials when both `S3_ACCESS_KEY_ID` and
 *   `S3_SECRET_ACCESS_KEY` are set (the SDK's default chain when neither is).
 * S3 chosen without `S3_BUCKET`, or with only one of the two credentials, does not stop start-up:
 * it gives a storage whose every operation throws AppError S3_NOT_CONFIGURED (500).
 * The S3 backend's module (and the AWS SDK) is imported only here, when S3 is chosen: the SDK costs
 * ~10 MB of heap in every process otherwise (issue #9, idle memory).
 */
export async function createFileStorage(config: StorageConfig): Promise<FileStorage> {
  if (storageBackendOf(config) === 'local') {
    const temporary = config.DATA_DIR === 'memory://';
    return new LocalDiskStorage({
      root: temporary
        ? mkdtempSync(path.join(tmpdir(), 'postwright-files-'))
        : path.resolve(config.DATA_DIR, 'files'),
      publicBaseUrl: `${config.BASE_URL}/files`,
      removeOnClose: temporary,
    });
  }

  const missing = [
    ...(config.S3_BUCKET ? [] : ['S3_BUCKET']),
    ...(Boolean(config.S3_ACCESS_KEY_ID) === Boolean(config.S3_SECRET_ACCESS_KEY)
      ? []
      : [config.S3_ACCESS_KEY_ID ? 'S3_SECRET_ACCESS_KEY' : 'S3_ACCESS_KEY_ID']),
  ];
  if (!config.S3_BUCKET || missing.length > 0) return new UnconfiguredS3Storage(missing);

  const { S3Storage, s3PublicBaseUrl } = await import('./storage.s3.ts');
  const forcePathStyle = config.S3_FORCE_PATH_STYLE ?? Boolean(config.S3_ENDPOINT);
  const options = {
    bucket: config.S3_BUCKET,
    region: config.S3_REGION,
    endpoint: config.S3_ENDPOINT,
    forcePathStyle,
  };
  return new S3Storage({
    ...options,
    credentials:
      config.S3_ACCESS_KEY_ID && config.S3_SECRET_ACCESS_KEY
        ? { accessKeyId: config.S3_ACCESS_KEY_ID, secretAccessKey: config.S3_SECRET_ACCESS_KEY }
        : undefined,
    publicBaseUrl: s3PublicBaseUrl({ ...options, publicUrl: config.S3_PUBLIC_URL }),
  });
}

/** S3 chosen without the settings it needs: every operation answers 500 S3_NOT_CONFIGURED. */
export class UnconfiguredS3Storage implements FileStorage {
  readonly kind = 'unconfigured';
  /** Names of the missing environment variables. */
  readonly missing: readonly string[];

  constructor(missing: readonly string[]) {
    this.missing = missing;
  }

  #error(): AppError {
    return new AppError('S3_NOT_CONFIGURED', `S3 storage is not configured: set ${this.missing.join(', ')}`, {
      missing: this.missing,
    });
  }

  async put(): Promise<void> {
    throw this.#error();
  }

  async get(): Promise<undefined> {
    throw this.#error();
  }

  async delete(): Promise<boolean> {
    throw this.#error();
  }

  publicUrl(): string {
    throw this.#error();
  }

  async close(): Promise<void> {}
}
