import { Readable } from 'node:stream';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createS3Client } from '../src/modules/storage/storage.s3.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { setupOwner, type TeamOwner } from './helpers/auth.ts';
import { expectError } from './helpers/factories.ts';
import { freePort } from './helpers/ports.ts';
import { startTestS3Server, type TestS3Server } from './helpers/s3-server.ts';
import { deleteUpload, JPEG_1X1, PNG_1X1, pathOf, SVG, uploadImage } from './helpers/uploads.ts';

/** `n` bytes of a PNG signature and header followed by varied (non-zero) bytes. */
function largePng(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  PNG_1X1.copy(bytes);
  for (let i = PNG_1X1.length; i < size; i++) bytes[i] = (i * 31 + 7) % 251;
  return bytes;
}

describe('image uploads to S3 (a real s3rver)', () => {
  let s3: TestS3Server;
  let ctx: TestContext;
  let owner: TeamOwner;
  let client: S3Client;

  const getObject = async (key: string) => {
    const object = await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }));
    return {
      bytes: Buffer.from(await object.Body!.transformToByteArray()),
      contentType: object.ContentType,
      cacheControl: object.CacheControl,
    };
  };

  beforeAll(async () => {
    s3 = await startTestS3Server();
    ctx = await createTestContext('postgres', s3.env);
    client = createS3Client({
      region: 'us-east-1',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    client?.destroy();
    await ctx?.close();
    await s3?.close();
  });

  it('stores the uploaded bytes unchanged in the bucket, with their content type, at a public URL', async () => {
    for (const [bytes, contentType] of [
      [PNG_1X1, 'image/png'],
      [JPEG_1X1, 'image/jpeg'],
      [largePng(3 * 1024 * 1024 + 17), 'image/png'],
    ] as const) {
      const response = await uploadImage(ctx.app, owner, { filename: 'x.png', bytes });
      expect(response.statusCode, response.body).toBe(201);
      const data = response.json().data;
      expect(data).toMatchObject({ contentType, size: bytes.length });
      expect(data.key).toMatch(new RegExp(`^${owner.teamId}/img_[0-9a-z]{26}\\.`));
      // Path style at the endpoint: S3_FORCE_PATH_STYLE defaults to true with S3_ENDPOINT.
      expect(data.url).toBe(`${s3.endpoint}/${s3.bucket}/${data.key}`);

      const stored = await getObject(data.key);
      expect(stored.bytes.length).toBe(bytes.length);
      expect(stored.bytes.equals(bytes)).toBe(true);
      expect(stored.contentType).toBe(contentType);
      expect(stored.cacheControl).toMatch(/max-age=31536000/);

      // The returned url is the object's address (s3rver, like a public-read bucket, serves it unsigned).
      const fetched = await fetch(data.url);
      expect(fetched.status).toBe(200);
      expect(fetched.headers.get('content-type')).toBe(contentType);
      expect(Buffer.from(await fetched.arrayBuffer()).equals(bytes)).toBe(true);
    }
  });

  it("keeps checksums to WHEN_REQUIRED: a streamed body arrives intact (the SDK's default corrupts it)", async () => {
    // With the default WHEN_SUPPORTED the SDK sends a stream aws-chunked with a trailing checksum,
    // which s3rver stores verbatim. The storage's client factory must not do that.
    const body = largePng(64 * 1024);
    await client.send(
      new PutObjectCommand({
        Bucket: s3.bucket,
        Key: 'checksum-probe/streamed.png',
        Body: Readable.from([body.subarray(0, 1000), body.subarray(1000)]),
        ContentLength: body.length,
        ContentType: 'image/png',
      }),
    );
    expect((await getObject('checksum-probe/streamed.png')).bytes.equals(body)).toBe(true);
  });

  it('refuses non-images before anything reaches the bucket', async () => {
    expectError(
      await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: SVG }),
      400,
      'INVALID_FILE_TYPE',
    );
  });

  it("deletes the team's object from the bucket; another team's key is 404 and the object stays", async () => {
    const { key } = (await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json().data;

    const other = await setupOwner(ctx.app);
    expectError(await deleteUpload(ctx.app, other, key), 404, 'NOT_FOUND');
    expect((await getObject(key)).bytes.equals(PNG_1X1)).toBe(true);

    const response = await deleteUpload(ctx.app, owner, key);
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toEqual({ success: true });
    await expect(getObject(key)).rejects.toMatchObject({ name: 'NoSuchKey' });
    expectError(await deleteUpload(ctx.app, owner, key), 404, 'NOT_FOUND');
  });

  it('does not serve /files/* itself: objects are served by S3', async () => {
    const { key } = (await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json().data;
    expectError(await ctx.app.inject({ method: 'GET', url: `/files/${key}` }), 404, 'NOT_FOUND');
  });

  it('builds public URLs from S3_PUBLIC_URL when it is set', async () => {
    const cdn = await createTestContext('postgres', {
      ...s3.env,
      S3_PUBLIC_URL: 'https://cdn.example.com/media/',
    });
    try {
      const team = await setupOwner(cdn.app);
      const { key, url } = (await uploadImage(cdn.app, team, { filename: 'a.png', bytes: PNG_1X1 })).json()
        .data;
      expect(url).toBe(`https://cdn.example.com/media/${key}`);
      expect(pathOf(url)).toBe(`/media/${key}`);
      expect((await getObject(key)).bytes.equals(PNG_1X1)).toBe(true);
    } finally {
      await cdn.close();
    }
  });
});

describe('STORAGE=s3 without S3_BUCKET', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    // Start-up must not fail: the misconfiguration shows on the upload routes only.
    ctx = await createTestContext('postgres', {
      STORAGE: 's3',
      S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`, // nothing listens there
    });
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('starts, and answers uploads and deletes with 500 S3_NOT_CONFIGURED', async () => {
    const owner = await setupOwner(ctx.app);
    expect((await ctx.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);

    const upload = expectError(
      await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 }),
      500,
      'S3_NOT_CONFIGURED',
    );
    expect(upload.details.missing).toEqual(['S3_BUCKET']);
    expectError(
      await deleteUpload(ctx.app, owner, `${owner.teamId}/img_01jz0000000000000000000000.png`),
      500,
      'S3_NOT_CONFIGURED',
    );
  });
});
