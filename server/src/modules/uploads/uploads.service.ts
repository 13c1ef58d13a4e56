import { and, count, desc, eq, sql } from 'drizzle-orm';
import { typeid } from 'typeid-js';
import type { Database, Executor } from '../../db/client.ts';
import { uploads } from '../../db/schema/index.ts';
import { type Page, page } from '../../http/envelope.ts';
import { AppError, notFound } from '../../http/errors.ts';
import type { FileStorage } from '../storage/index.ts';
import type { StoredImage, UploadedImage, UploadUsage } from './uploads.schema.ts';

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

/** A team's upload quota (config UPLOAD_TEAM_QUOTA_BYTES and UPLOAD_TEAM_MAX_FILES). */
export interface UploadQuota {
  /** Bytes of images a team keeps at once. */
  quotaBytes: number;
  /** Images a team keeps at once. */
  maxFiles: number;
}

/** Where uploads go and what bounds them: the database (their rows), the storage, the quota. */
export interface UploadDeps {
  db: Database;
  storage: FileStorage;
  quota: UploadQuota;
}

/** The team's bytes and images held now (rows of `uploads`), on `db` (a transaction: under its lock). */
async function usageOf(db: Executor, teamId: string): Promise<{ bytes: number; files: number }> {
  const [row] = await db
    .select({ bytes: sql<string>`coalesce(sum(${uploads.size}), 0)::text`, files: count() })
    .from(uploads)
    .where(eq(uploads.teamId, teamId));
  return { bytes: Number(row?.bytes ?? 0), files: row?.files ?? 0 };
}

/**
 * Stores an uploaded image for `teamId` under a new random key, within the team's quota. The row is
 * written first (under the team's upload lock, so concurrent uploads cannot pass the quota
 * together), then the file; when storing the file fails the row is removed again.
 * @param bytes the whole file, already capped at the upload limit by the caller.
 * @returns `{url, key, contentType, size}` (size in bytes; url public, without authentication).
 * @throws AppError INVALID_FILE_TYPE (see {@link detectImageType}); CONFLICT (409, reason
 *   DELETED_DURING_UPLOAD) when the image was deleted before its file was stored; FILE_TOO_LARGE (400, details
 *   `{reason: 'UPLOAD_QUOTA_EXCEEDED', usedBytes, quotaBytes, files, maxFiles, size}`) when the image
 *   would take the team past UPLOAD_TEAM_QUOTA_BYTES or UPLOAD_TEAM_MAX_FILES (delete images to make
 *   room: `GET /api/uploads/images` lists them); S3_NOT_CONFIGURED (500) from storage.
 */
export async function storeImage(deps: UploadDeps, teamId: string, bytes: Buffer): Promise<UploadedImage> {
  const { db, storage, quota } = deps;
  const { contentType, extension } = await detectImageType(bytes);
  const key = newImageKey(teamId, extension);
  await db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`uploads:${teamId}`}))`);
    const used = await usageOf(tx, teamId);
    if (used.bytes + bytes.length > quota.quotaBytes || used.files + 1 > quota.maxFiles) {
      throw new AppError(
        'FILE_TOO_LARGE',
        `The team's uploaded images would exceed its quota of ${quota.quotaBytes} bytes and ${quota.maxFiles} files; delete images to make room`,
        {
          reason: 'UPLOAD_QUOTA_EXCEEDED',
          usedBytes: used.bytes,
          quotaBytes: quota.quotaBytes,
          files: used.files,
          maxFiles: quota.maxFiles,
          size: bytes.length,
        },
      );
    }
    await tx.insert(uploads).values({ key, teamId, contentType, size: bytes.length });
  });
  try {
    await storage.put(key, bytes, contentType);
  } catch (error) {
    await db
      .delete(uploads)
      .where(eq(uploads.key, key))
      .catch(() => undefined);
    throw error;
  }
  // The row is listed from its insert: a delete may have taken it while the file was being stored
  // (review finding, session 16: the file then stayed, served but neither counted nor listed). A
  // delete removes the row before the file, so a row still here after the file is stored is kept.
  const [still] = await db.select({ key: uploads.key }).from(uploads).where(eq(uploads.key, key));
  if (!still) {
    await storage.delete(key);
    throw new AppError('CONFLICT', 'The image was deleted while it was being stored', {
      reason: 'DELETED_DURING_UPLOAD',
      key,
    });
  }
  return { url: storage.publicUrl(key), key, contentType, size: bytes.length };
}

/**
 * Deletes the team's image `key`: its row (its bytes leave the quota), then the file, outside any
 * transaction (a storage call never holds a database connection: review finding, session 16). An
 * upload still storing that file sees its row gone when it re-checks, and removes the file itself
 * (storeImage); a file whose delete failed after its row went is removed by deleting again.
 * @throws AppError NOT_FOUND (404) when the key is not one of the team's uploaded images
 *   ({@link isTeamImageKey}: another team's file or a thumbnail looks exactly like a missing one) or
 *   neither a file nor a row is held under it; S3_NOT_CONFIGURED (500).
 */
export async function deleteImage(deps: UploadDeps, teamId: string, key: string): Promise<void> {
  if (!isTeamImageKey(teamId, key)) throw notFound('File');
  const rows = await deps.db
    .delete(uploads)
    .where(and(eq(uploads.teamId, teamId), eq(uploads.key, key)))
    .returning({ key: uploads.key });
  const fileDeleted = await deps.storage.delete(key);
  if (!fileDeleted && rows.length === 0) throw notFound('File');
}

/** The team's uploaded images, newest first, paginated (images uploaded before quotas existed are not listed). */
export async function listImages(
  deps: Pick<UploadDeps, 'db' | 'storage'>,
  teamId: string,
  query: { page: number; pageSize: number },
): Promise<Page<StoredImage>> {
  const where = eq(uploads.teamId, teamId);
  const [rows, totals] = await Promise.all([
    deps.db
      .select()
      .from(uploads)
      .where(where)
      .orderBy(desc(uploads.createdAt), desc(uploads.key))
      .limit(query.pageSize)
      .offset((query.page - 1) * query.pageSize),
    deps.db.select({ total: count() }).from(uploads).where(where),
  ]);
  const items = rows.map((row) => ({
    url: deps.storage.publicUrl(row.key),
    key: row.key,
    contentType: row.contentType,
    size: row.size,
    createdAt: row.createdAt.toISOString(),
  }));
  return page(items, totals[0]?.total ?? 0, query.page, query.pageSize);
}

/** What the team's images take of its quota now. */
export async function uploadUsage(
  deps: Pick<UploadDeps, 'db' | 'quota'>,
  teamId: string,
): Promise<UploadUsage> {
  const used = await usageOf(deps.db, teamId);
  return {
    usedBytes: used.bytes,
    quotaBytes: deps.quota.quotaBytes,
    files: used.files,
    maxFiles: deps.quota.maxFiles,
  };
}
