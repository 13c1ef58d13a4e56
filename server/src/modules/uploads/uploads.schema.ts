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
