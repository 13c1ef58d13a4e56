import { z } from 'zod';

/** `data` of `POST /api/uploads/images`: where the image is served and what was stored. */
export const uploadedImageView = z.object({
  url: z.string(),
  key: z.string(),
  contentType: z.string(),
  /** Bytes stored. */
  size: z.number().int(),
});
export type UploadedImage = z.infer<typeof uploadedImageView>;

/** An item of `GET /api/uploads/images`: an uploaded image and when it was uploaded. */
export const storedImageView = uploadedImageView.extend({ createdAt: z.string() });
export type StoredImage = z.infer<typeof storedImageView>;

/** `data` of `GET /api/uploads/usage`: the team's images against its quota (bytes and files). */
export const uploadUsageView = z.object({
  usedBytes: z.number().int(),
  quotaBytes: z.number().int(),
  files: z.number().int(),
  maxFiles: z.number().int(),
});
export type UploadUsage = z.infer<typeof uploadUsageView>;

/**
 * The multipart form of `POST /api/uploads/images`, for the OpenAPI document only: the route reads
 * the file as a stream (see `readUploadedFile`) and does not validate its parsed body against this.
 */
export const uploadImageForm = z.object({
  file: z.string().meta({ format: 'binary', description: 'A PNG, JPEG, GIF or WebP image' }),
});

/** `DELETE /api/uploads/images/:key`: the key as returned by the upload, URL-encoded in the path. */
export const uploadKeyParams = z.object({ key: z.string().min(1).max(512) });

/** `GET /files/*`: the storage key after `/files/`. */
export const publicFileParams = z.object({ '*': z.string() });
