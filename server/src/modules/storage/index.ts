/** The storage module's public face: where uploaded files live (local disk or S3). */
export { createFileStorage, storageBackendOf, UnconfiguredS3Storage } from './storage.factory.ts';
export { isValidStorageKey } from './storage.key.ts';
export { LocalDiskStorage } from './storage.local.ts';
// storage.s3.ts (the AWS SDK, ~10 MB of heap) is not re-exported: the factory imports it only for S3.
export {
  type FileStorage,
  IMMUTABLE_CACHE_CONTROL,
  type StorageKind,
  type StoredFile,
} from './storage.types.ts';
