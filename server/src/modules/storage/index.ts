/** The storage module's public face: where uploaded files live (local disk or S3). */
export { createFileStorage, storageBackendOf, UnconfiguredS3Storage } from './storage.factory.ts';
export { isValidStorageKey } from './storage.key.ts';
export { LocalDiskStorage } from './storage.local.ts';
export { createS3Client, IMMUTABLE_CACHE_CONTROL, S3Storage, s3PublicBaseUrl } from './storage.s3.ts';
export type { FileStorage, StorageKind, StoredFile } from './storage.types.ts';
