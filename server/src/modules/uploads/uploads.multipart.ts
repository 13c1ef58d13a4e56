import type { FastifyRequest } from 'fastify';
import { AppError, validationError } from '../../http/errors.ts';

/** @fastify/multipart's error codes and what the envelope says for each. */
function toUploadError(error: unknown, maxBytes: number): unknown {
  switch ((error as { code?: string }).code) {
    case 'FST_REQ_FILE_TOO_LARGE':
      return new AppError('FILE_TOO_LARGE', `File exceeds the ${maxBytes}-byte upload limit`, { maxBytes });
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return new AppError('INVALID_INPUT', 'Uploads must be multipart/form-data', {
        reason: 'UNSUPPORTED_CONTENT_TYPE',
      });
    case 'FST_PARTS_LIMIT':
    case 'FST_FILES_LIMIT':
    case 'FST_FIELDS_LIMIT':
      return new AppError('INVALID_INPUT', 'Too many parts in the multipart body', {
        reason: 'TOO_MANY_PARTS',
      });
    case 'FST_MP_PREMATURE_CLOSE':
      return new AppError('INVALID_INPUT', 'The upload was interrupted', { reason: 'PREMATURE_CLOSE' });
    default:
      return error;
  }
}

/**
 * Reads the one file of a multipart/form-data request from the form field `field`, streaming it with
 * a cap: at most `maxBytes` bytes are ever held in memory (the rest is discarded as it arrives).
 * @returns the file's bytes and the client's file name (informational only: never trusted for the type).
 * @throws AppError FILE_TOO_LARGE (400, `details.maxBytes`) above `maxBytes`; VALIDATION_ERROR (400)
 *   without a file in `field`; INVALID_INPUT (400) when the body is not multipart/form-data.
 */
export async function readUploadedFile(
  request: FastifyRequest,
  field: string,
  maxBytes: number,
): Promise<{ bytes: Buffer; filename: string }> {
  try {
    const part = await request.file({ limits: { fileSize: maxBytes, files: 1 }, throwFileSizeLimit: true });
    if (!part || part.fieldname !== field) {
      part?.file.resume();
      throw validationError([
        { path: `body.${field}`, message: `a file in the form field "${field}" is required` },
      ]);
    }
    return { bytes: await part.toBuffer(), filename: part.filename };
  } catch (error) {
    throw toUploadError(error, maxBytes);
  }
}
