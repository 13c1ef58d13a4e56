import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { assertValidStorageKey, isValidStorageKey, keyToUrlPath } from './storage.key.ts';
import { type FileStorage, IMMUTABLE_CACHE_CONTROL, type StoredFile } from './storage.types.ts';

export { IMMUTABLE_CACHE_CONTROL };

export interface S3ClientOptions {
  region: string;
  /** An S3-compatible endpoint (MinIO, s3rver, R2); AWS itself when absent. */
  endpoint?: string;
  /** `https://endpoint/bucket/key` instead of `https://bucket.endpoint/key`. */
  forcePathStyle: boolean;
  /** Static credentials; the SDK's default chain (environment, instance role) when absent. */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/** How long (ms) an S3 connection may take to open, and one request to be answered. */
export const S3_CONNECT_TIMEOUT_MS = 5_000;
export const S3_REQUEST_TIMEOUT_MS = 60_000;

/**
 * An S3 client with checksums only where the API requires them (ARCHITECTURE "files"): with the
 * SDK's default (`WHEN_SUPPORTED`) a streamed body is sent `aws-chunked` with a trailing checksum,
 * which S3-compatible servers such as s3rver store verbatim, i.e. corrupted.
 */
export function createS3Client(options: S3ClientOptions): S3Client {
  return new S3Client({
    region: options.region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials: options.credentials,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // The SDK waits for ever by default: a storage that stops answering held uploads, deletes and
    // thumbnail jobs (review finding, session 16). Without throwOnRequestTimeout the request
    // timeout only warns.
    requestHandler: {
      connectionTimeout: S3_CONNECT_TIMEOUT_MS,
      requestTimeout: S3_REQUEST_TIMEOUT_MS,
      throwOnRequestTimeout: true,
    },
  });
}

export interface S3StorageOptions extends S3ClientOptions {
  bucket: string;
  /** Base URL of public object URLs, without a trailing slash (see `s3PublicBaseUrl`). */
  publicBaseUrl: string;
}

/**
 * The public base URL of a bucket's objects: `S3_PUBLIC_URL` when set (a CDN or custom domain),
 * else the endpoint's bucket URL (path style `endpoint/bucket`, or virtual-hosted `bucket.endpoint`),
 * else AWS's virtual-hosted URL `https://<bucket>.s3.<region>.amazonaws.com`. No trailing slash.
 */
export function s3PublicBaseUrl(options: {
  bucket: string;
  region: string;
  endpoint?: string;
  forcePathStyle: boolean;
  publicUrl?: string;
}): string {
  if (options.publicUrl) return options.publicUrl.replace(/\/+$/, '');
  const bucket = encodeURIComponent(options.bucket);
  if (!options.endpoint) return `https://${bucket}.s3.${options.region}.amazonaws.com`;
  const endpoint = new URL(options.endpoint);
  const basePath = endpoint.pathname.replace(/\/+$/, '');
  if (options.forcePathStyle) return `${endpoint.origin}${basePath}/${bucket}`;
  return `${endpoint.protocol}//${bucket}.${endpoint.host}${basePath}`;
}

/**
 * Files as objects in one S3 bucket, key = storage key. Objects are written with their content type
 * and a one-year immutable Cache-Control; whether they are publicly readable is the bucket's policy.
 */
export class S3Storage implements FileStorage {
  readonly kind = 's3';
  readonly #client: S3Client;
  readonly #bucket: string;
  readonly #publicBaseUrl: string;

  constructor(options: S3StorageOptions) {
    this.#client = createS3Client(options);
    this.#bucket = options.bucket;
    this.#publicBaseUrl = options.publicBaseUrl.replace(/\/+$/, '');
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    assertValidStorageKey(key);
    await this.#client.send(
      new PutObjectCommand({
        Bucket: this.#bucket,
        Key: key,
        Body: body,
        ContentType: contentType,
        ContentLength: body.length,
        CacheControl: IMMUTABLE_CACHE_CONTROL,
      }),
    );
  }

  async get(key: string): Promise<StoredFile | undefined> {
    if (!isValidStorageKey(key)) return undefined;
    try {
      const object = await this.#client.send(new GetObjectCommand({ Bucket: this.#bucket, Key: key }));
      return {
        body: object.Body as Readable,
        contentType: object.ContentType ?? 'application/octet-stream',
        size: object.ContentLength ?? 0,
      };
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async delete(key: string): Promise<boolean> {
    if (!isValidStorageKey(key)) return false;
    // DeleteObject succeeds for a missing key, so ask first to tell the caller whether there was one.
    try {
      await this.#client.send(new HeadObjectCommand({ Bucket: this.#bucket, Key: key }));
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
    await this.#client.send(new DeleteObjectCommand({ Bucket: this.#bucket, Key: key }));
    return true;
  }

  publicUrl(key: string): string {
    return `${this.#publicBaseUrl}/${keyToUrlPath(key)}`;
  }

  async close(): Promise<void> {
    this.#client.destroy();
  }
}

function isNotFound(error: unknown): boolean {
  return (
    error instanceof S3ServiceException &&
    (error.name === 'NoSuchKey' || error.name === 'NotFound' || error.$metadata.httpStatusCode === 404)
  );
}
