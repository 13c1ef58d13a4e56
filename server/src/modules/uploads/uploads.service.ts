import { typeid } from 'typeid-js';
import { AppError, notFound } from '../../http/errors.ts';
import type { FileStorage } from '../storage/index.ts';
import type { UploadedImage } from './uploads.schema.ts';

/** Image types the builder accepts (issue #4), by detected MIME type → file extension. SVG is not one. */
export const IMAGE_TYPES: Readonly<Record<string, string>> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
};

/** Prefix of the random part of an image key (`img_<typeid>`). */
const IMAGE_KEY_PREFIX = 'img';

/**
 * The type of `bytes`, detected from their content with `file-type` (magic numbers), never from a
 * file name or a client-sent Content-Type. An animated PNG (APNG) is a PNG and counts as `image/png`.
 * @returns the MIME type and the extension keys get.
 * @throws AppError INVALID_FILE_TYPE (400) for anything but PNG, JPEG, GIF and WebP: SVG and other
 *   text (file-type detects no type in text), PDFs, empty files; `details` = `{detected, allowed}`.
 */
export async function detectImageType(bytes: Buffer): Promise<{ contentType: string; extension: string }> {
  // file-type (and its tokenizer packages, ~2 MB of heap) loads on the first upload, not at start
  // (issue #9, idle memory).
  const detected = bytes.length > 0 ? await (await import('file-type')).fileTypeFromBuffer(bytes) : undefined;
  const contentType = detected?.mime === 'image/apng' ? 'image/png' : detected?.mime;
  const extension = contentType ? IMAGE_TYPES[contentType] : undefined;
  if (!contentType || !extension) {
    throw new AppError('INVALID_FILE_TYPE', 'Only PNG, JPEG, GIF and WebP images can be uploaded', {
      detected: detected?.mime ?? null,
      allowed: Object.keys(IMAGE_TYPES),
    });
  }
  return { contentType, extension };
}

/** A new key for an image of `teamId`: `<teamId>/img_<typeid>.<extension>` (random, time-sortable). */
export function newImageKey(teamId: string, extension: string): string {
  return `${teamId}/${typeid(IMAGE_KEY_PREFIX).toString()}.${extension}`;
}

/** The file name part of an upload key: `img_` + a TypeID suffix (26 base32 characters) + extension. */
const UPLOAD_KEY = new RegExp(
  `^${IMAGE_KEY_PREFIX}_[0-9a-hjkmnp-tv-z]{26}\\.(?:${[...new Set(Object.values(IMAGE_TYPES))].join('|')})$`,
);

/**
 * True when `key` is one of `teamId`'s uploaded images, as {@link newImageKey} makes them
 * (`<teamId>/img_<26 characters>.<png|jpg|gif|webp>`): the only keys the team may delete. Other
 * files under the team's prefix are the service's own (template thumbnails, kept while a template
 * shows them): a prefix check let the delete route remove a thumbnail still in use (review
 * finding, session 14).
 */
function isTeamImageKey(teamId: string, key: string): boolean {
  if (!key.startsWith(`${teamId}/`)) return false;
  return UPLOAD_KEY.test(key.slice(teamId.length + 1));
}

/**
 * Stores an uploaded image for `teamId` under a new random key.
 * @param bytes the whole file, already capped at the upload limit by the caller.
 * @returns `{url, key, contentType, size}` (size in bytes; url public, without authentication).
 * @throws AppError INVALID_FILE_TYPE (see {@link detectImageType}); S3_NOT_CONFIGURED (500) from storage.
 */
export async function storeImage(
  storage: FileStorage,
  teamId: string,
  bytes: Buffer,
): Promise<UploadedImage> {
  const { contentType, extension } = await detectImageType(bytes);
  const key = newImageKey(teamId, extension);
  await storage.put(key, bytes, contentType);
  return { url: storage.publicUrl(key), key, contentType, size: bytes.length };
}

/**
 * Deletes the team's image `key`.
 * @throws AppError NOT_FOUND (404) when the key is not one of the team's uploaded images
 *   ({@link isTeamImageKey}: another team's file or a thumbnail looks exactly like a missing one) or
 *   nothing is stored under it; S3_NOT_CONFIGURED (500).
 */
export async function deleteImage(storage: FileStorage, teamId: string, key: string): Promise<void> {
  if (!isTeamImageKey(teamId, key) || !(await storage.delete(key))) throw notFound('File');
}
