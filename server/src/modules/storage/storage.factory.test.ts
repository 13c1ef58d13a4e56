import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../config.ts';
import { AppError } from '../../http/errors.ts';
import { createFileStorage, storageBackendOf } from './storage.factory.ts';
import { s3PublicBaseUrl } from './storage.s3.ts';

const config = (env: Record<string, string>) => loadConfig({ DATA_DIR: 'memory://', ...env });

describe('createFileStorage', () => {
  it('uses the local disk by default and S3 when S3_BUCKET is set or STORAGE=s3', async () => {
    expect(storageBackendOf(config({}))).toBe('local');
    expect(storageBackendOf(config({ S3_BUCKET: 'b' }))).toBe('s3');
    expect(storageBackendOf(config({ STORAGE: 's3' }))).toBe('s3');
    expect(storageBackendOf(config({ STORAGE: 'local', S3_BUCKET: 'b' }))).toBe('local');

    const local = await createFileStorage(config({ BASE_URL: 'https://mail.example.com' }));
    expect(local.kind).toBe('local');
    expect(local.publicUrl('t/a.png')).toBe('https://mail.example.com/files/t/a.png');
    await local.close();

    const s3 = await createFileStorage(config({ S3_BUCKET: 'media', S3_REGION: 'eu-west-3' }));
    expect(s3.kind).toBe('s3');
    expect(s3.publicUrl('t/a.png')).toBe('https://media.s3.eu-west-3.amazonaws.com/t/a.png');
    await s3.close();
  });

  it('gives S3_NOT_CONFIGURED on use, not at start-up, when S3 lacks its settings', async () => {
    for (const [env, missing] of [
      [{ STORAGE: 's3' }, ['S3_BUCKET']],
      [{ S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'id' }, ['S3_SECRET_ACCESS_KEY']],
      [{ S3_BUCKET: 'b', S3_SECRET_ACCESS_KEY: 'secret' }, ['S3_ACCESS_KEY_ID']],
    ] as const) {
      const storage = await createFileStorage(config(env));
      expect(storage.kind).toBe('unconfigured');
      const error = await storage.put('t/a.png', Buffer.from('x'), 'image/png').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AppError);
      expect(error).toMatchObject({ code: 'S3_NOT_CONFIGURED', statusCode: 500, details: { missing } });
    }
  });

  it('refuses a malformed S3_ENDPOINT, S3_PUBLIC_URL or S3_FORCE_PATH_STYLE at start-up', () => {
    expect(() => config({ S3_ENDPOINT: 'not a url' })).toThrow(/^Invalid S3_ENDPOINT: /);
    expect(() => config({ S3_PUBLIC_URL: 'cdn' })).toThrow(/^Invalid S3_PUBLIC_URL: /);
    expect(() => config({ S3_FORCE_PATH_STYLE: 'yes' })).toThrow(/^Invalid S3_FORCE_PATH_STYLE: /);
    expect(() => config({ STORAGE: 'gcs' })).toThrow(/^Invalid STORAGE: /);
    expect(() => config({ UPLOAD_MAX_BYTES: '0' })).toThrow(/^Invalid UPLOAD_MAX_BYTES: /);
    expect(config({}).UPLOAD_MAX_BYTES).toBe(5 * 1024 * 1024);
  });
});

describe('s3PublicBaseUrl', () => {
  const base = { bucket: 'media', region: 'us-east-1', forcePathStyle: false };

  it('prefers S3_PUBLIC_URL, then the endpoint in path or virtual-host style, then AWS', () => {
    expect(s3PublicBaseUrl({ ...base, publicUrl: 'https://cdn.example.com/m/' })).toBe(
      'https://cdn.example.com/m',
    );
    expect(s3PublicBaseUrl({ ...base, endpoint: 'http://127.0.0.1:9000', forcePathStyle: true })).toBe(
      'http://127.0.0.1:9000/media',
    );
    expect(s3PublicBaseUrl({ ...base, endpoint: 'https://s3.example.com' })).toBe(
      'https://media.s3.example.com',
    );
    expect(s3PublicBaseUrl(base)).toBe('https://media.s3.us-east-1.amazonaws.com');
  });
});
