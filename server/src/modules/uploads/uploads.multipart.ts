import type { FastifyRequest } from 'fastify';
import { AppError, validationError } from '../../http/errors.ts';

/**
 * busboy's parse failures (@fastify/busboy: "Multipart: Boundary not found", "Unexpected end of
 * multipart data", "Part terminated early due to unexpected end of multipart data") are plain
 * errors without a code; server faults (I/O, system calls) carry one, and are not the client's.
 */
const MULTIPART_PARSE_MESSAGE =
  /^Multipart:|^Unexpected end of|unexpected end of multipart data|^The needle cannot have a length/;

/**
 * The longest multipart boundary (RFC 2046 §5.1.1: 1 to 70 characters). busboy's search throws on
 * one over 252 characters ("The needle cannot have a length bigger than 256"), which was a 500.
 */
const MAX_BOUNDARY_CHARS = 70;

/** The `boundary` parameter of a Content-Type header (quoted or not), or undefined. */
function boundaryOf(contentType: string | undefined): string | undefined {
  const match = /;\s*boundary=(?:"([^"]*)"|([^;\s]*))/i.exec(contentType ?? '');
  return match ? (match[1] ?? match[2]) : undefined;
}

function malformedMultipart(): AppError {
  return new AppError('INVALID_INPUT', 'The multipart/form-data body is malformed', {
    reason: 'MALFORMED_MULTIPART',
  });
}

function isMultipartParseError(error: unknown): error is Error {
  return (
    error instanceof Error &&
    !(error instanceof AppError) &&
    (error as { code?: unknown }).code === undefined &&
    MULTIPART_PARSE_MESSAGE.test(error.message)
  );
}

/** @fastify/multipart's error codes, and busboy's parse failures, and what the envelope says for each. */
function toUploadError(error: unknown, maxBytes: number): unknown {
  if (isMultipartParseError(error)) return malformedMultipart();
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
 *   without a file in `field`; INVALID_INPUT (400) when the body is not multipart/form-data (reason
 *   UNSUPPORTED_CONTENT_TYPE), has too many parts (TOO_MANY_PARTS), was interrupted (PREMATURE_CLOSE)
 *   or cannot be parsed: no boundary, one over 70 characters (RFC 2046), truncated
 *   (MALFORMED_MULTIPART).
 */
export async function readUploadedFile(
  request: FastifyRequest,
  field: string,
  maxBytes: number,
): Promise<{ bytes: Buffer; filename: string }> {
  const boundary = boundaryOf(request.headers['content-type']);
  if (boundary !== undefined && boundary.length > MAX_BOUNDARY_CHARS) throw malformedMultipart();
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
