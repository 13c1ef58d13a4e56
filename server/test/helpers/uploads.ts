import type { FastifyInstance } from 'fastify';
import { sessionHeaders } from './auth.ts';

/** A 1×1 RGBA PNG (IHDR, one IDAT, IEND; CRCs valid). */
export const PNG_1X1 = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

/** A 1×1 transparent GIF89a. */
export const GIF_1X1 = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

/** A 1×1 lossless WebP (RIFF size field = file length - 8). */
export const WEBP_1X1 = Buffer.from('UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==', 'base64');

/**
 * A 1×1 grey baseline JPEG built marker by marker: quantisation table of ones, one 8-bit component,
 * one-code Huffman tables (DC category 0, AC end-of-block), then two zero bits padded with ones.
 */
export const JPEG_1X1 = Buffer.concat([
  Buffer.from([0xff, 0xd8]), // SOI
  Buffer.from([0xff, 0xdb, 0x00, 0x43, 0x00]), // DQT, table 0, 8-bit
  Buffer.alloc(64, 1),
  Buffer.from([0xff, 0xc0, 0x00, 0x0b, 0x08, 0x00, 0x01, 0x00, 0x01, 0x01, 0x01, 0x11, 0x00]), // SOF0 1×1
  Buffer.from([0xff, 0xc4, 0x00, 0x14, 0x00, 1, ...Array(15).fill(0), 0x00]), // DHT DC 0: '0' → category 0
  Buffer.from([0xff, 0xc4, 0x00, 0x14, 0x10, 1, ...Array(15).fill(0), 0x00]), // DHT AC 0: '0' → EOB
  Buffer.from([0xff, 0xda, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3f, 0x00]), // SOS
  Buffer.from([0x3f]), // DC '0', AC EOB '0', padding 111111
  Buffer.from([0xff, 0xd9]), // EOI
]);

/** An SVG with a script: text, so content detection finds no image type. */
export const SVG = Buffer.from(
  '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"><script>alert(1)</script></svg>',
);

/** One multipart/form-data part: a file in the form field `name`. */
export interface FilePart {
  name?: string;
  filename: string;
  /** The client-declared Content-Type (never trusted by the server). */
  type?: string;
  bytes: Uint8Array;
}

/** A multipart/form-data body serialised by the platform's own FormData (undici), with its header. */
export async function multipartBody(
  parts: FilePart[],
): Promise<{ payload: Buffer; headers: { 'content-type': string } }> {
  const form = new FormData();
  for (const part of parts) {
    form.append(
      part.name ?? 'file',
      new Blob([new Uint8Array(part.bytes)], { type: part.type ?? 'application/octet-stream' }),
      part.filename,
    );
  }
  const request = new Request('http://upload.test/', { method: 'POST', body: form });
  return {
    payload: Buffer.from(await request.arrayBuffer()),
    headers: { 'content-type': request.headers.get('content-type') ?? '' },
  };
}

/** `POST /api/uploads/images` as `user` (cookie + Origin) with one file part; the raw response. */
export async function uploadImage(app: FastifyInstance, user: { cookie: string } | null, part: FilePart) {
  const { payload, headers } = await multipartBody([part]);
  return app.inject({
    method: 'POST',
    url: '/api/uploads/images',
    headers: { ...headers, ...(user ? sessionHeaders(app, user) : {}) },
    payload,
  });
}

/** `DELETE /api/uploads/images/:key` as `user`, the key URL-encoded. */
export function deleteUpload(app: FastifyInstance, user: { cookie: string }, key: string) {
  return app.inject({
    method: 'DELETE',
    url: `/api/uploads/images/${encodeURIComponent(key)}`,
    headers: sessionHeaders(app, user),
  });
}

/** The path part of a public file URL (what `app.inject` needs). */
export function pathOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
}
