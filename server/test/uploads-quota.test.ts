import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { uploads } from '../src/db/schema/index.ts';
import type { FileStorage } from '../src/modules/storage/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { addTeamMember, sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import { expectError } from './helpers/factories.ts';
import { deleteUpload, PNG_1X1, pathOf, uploadImage } from './helpers/uploads.ts';

// Session 16: uploads had no per-team bound (40 × 5 MB went in 1.6 s onto the disk the embedded
// PostgreSQL shares). A team now keeps at most UPLOAD_TEAM_QUOTA_BYTES and UPLOAD_TEAM_MAX_FILES.
const SIZE = PNG_1X1.length;

/** `GET path` as `user`, the parsed body. */
async function getAs(ctx: TestContext, user: TeamOwner | { cookie: string }, url: string) {
  const response = await ctx.app.inject({ method: 'GET', url, headers: sessionHeaders(ctx.app, user) });
  expect(response.statusCode, response.body).toBe(200);
  return response.json().data;
}

/**
 * Holds every call of the storage's `method` until `release()`, as a storage that stops answering
 * would; `restore()` puts the method back.
 */
function holdStorage(storage: FileStorage, method: 'put' | 'delete') {
  const original = storage[method] as (...args: unknown[]) => Promise<unknown>;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  (storage as unknown as Record<string, unknown>)[method] = async (...args: unknown[]) => {
    await released;
    return original.apply(storage, args);
  };
  return {
    release,
    restore: () => {
      release();
      (storage as unknown as Record<string, unknown>)[method] = original;
    },
  };
}

describe('per-team upload quota', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    // Room for three 1×1 PNGs by bytes, and five images by count.
    ctx = await createTestContext('postgres', {
      UPLOAD_TEAM_QUOTA_BYTES: String(3 * SIZE),
      UPLOAD_TEAM_MAX_FILES: '5',
    });
  });
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(async () => {
    await ctx?.close();
  });

  it('refuses the image past the byte quota with FILE_TOO_LARGE and its figures; a delete makes room', async () => {
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 });
      expect(response.statusCode, response.body).toBe(201);
      keys.push(response.json().data.key);
    }
    const refused = expectError(
      await uploadImage(ctx.app, owner, { filename: 'b.png', bytes: PNG_1X1 }),
      400,
      'FILE_TOO_LARGE',
    );
    expect(refused.details).toEqual({
      reason: 'UPLOAD_QUOTA_EXCEEDED',
      usedBytes: 3 * SIZE,
      quotaBytes: 3 * SIZE,
      files: 3,
      maxFiles: 5,
      size: SIZE,
    });

    // Another team has its own quota.
    const other = await setupOwner(ctx.app);
    expect((await uploadImage(ctx.app, other, { filename: 'c.png', bytes: PNG_1X1 })).statusCode).toBe(201);

    expect((await deleteUpload(ctx.app, owner, keys[0]!)).statusCode).toBe(200);
    expect(await getAs(ctx, owner, '/api/uploads/usage')).toEqual({
      usedBytes: 2 * SIZE,
      quotaBytes: 3 * SIZE,
      files: 2,
      maxFiles: 5,
    });
    expect((await uploadImage(ctx.app, owner, { filename: 'd.png', bytes: PNG_1X1 })).statusCode).toBe(201);
  });

  it('refuses the image past UPLOAD_TEAM_MAX_FILES', async () => {
    const small = await createTestContext('postgres', { UPLOAD_TEAM_MAX_FILES: '2' });
    try {
      const team = await setupOwner(small.app);
      for (let i = 0; i < 2; i++) {
        expect((await uploadImage(small.app, team, { filename: 'a.png', bytes: PNG_1X1 })).statusCode).toBe(
          201,
        );
      }
      const refused = expectError(
        await uploadImage(small.app, team, { filename: 'a.png', bytes: PNG_1X1 }),
        400,
        'FILE_TOO_LARGE',
      );
      expect(refused.details).toMatchObject({ reason: 'UPLOAD_QUOTA_EXCEEDED', files: 2, maxFiles: 2 });
    } finally {
      await small.close();
    }
  });

  it('lets concurrent uploads pass the quota only as far as it goes', async () => {
    const responses = await Promise.all(
      Array.from({ length: 10 }, () => uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })),
    );
    const statuses = responses.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, 201, 201, 400, 400, 400, 400, 400, 400, 400]);
    expect((await getAs(ctx, owner, '/api/uploads/usage')).usedBytes).toBe(3 * SIZE);
  });

  it("lists the team's images newest first, paginated, to any member, and never another team's", async () => {
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) {
      keys.push((await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 })).json().data.key);
    }
    const other = await setupOwner(ctx.app);
    await uploadImage(ctx.app, other, { filename: 'x.png', bytes: PNG_1X1 });

    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    const first = await getAs(ctx, viewer, '/api/uploads/images?pageSize=2');
    expect(first).toMatchObject({ total: 3, page: 1, pageSize: 2, totalPages: 2 });
    const second = await getAs(ctx, viewer, '/api/uploads/images?pageSize=2&page=2');
    const listed = [...first.items, ...second.items];
    expect(listed.map((item: { key: string }) => item.key)).toEqual([...keys].reverse());
    const [newest] = listed;
    expect(Object.keys(newest).sort()).toEqual(['contentType', 'createdAt', 'key', 'size', 'url']);
    expect(newest).toMatchObject({
      contentType: 'image/png',
      size: SIZE,
      url: ctx.app.ctx.storage.publicUrl(keys[2]!),
    });
    expect((await ctx.app.inject({ method: 'GET', url: pathOf(newest.url) })).statusCode).toBe(200);

    expectError(await ctx.app.inject({ method: 'GET', url: '/api/uploads/images' }), 401, 'UNAUTHORIZED');
    expectError(
      await ctx.app.inject({
        method: 'GET',
        url: '/api/uploads/images?pageSize=101',
        headers: sessionHeaders(ctx.app, owner),
      }),
      400,
      'VALIDATION_ERROR',
    );
  });

  it('takes the row back when storing the file fails, so a failed upload costs no quota', async () => {
    const storage = ctx.app.ctx.storage;
    const put = storage.put;
    storage.put = async () => {
      throw new Error('disk full');
    };
    try {
      const response = await uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 });
      expect(response.statusCode).toBe(500);
    } finally {
      storage.put = put;
    }
    expect(await getAs(ctx, owner, '/api/uploads/usage')).toMatchObject({ usedBytes: 0, files: 0 });
    expect((await getAs(ctx, owner, '/api/uploads/images')).total).toBe(0);
  });

  it('an image deleted while its file is being stored: the upload answers 409 and nothing stays behind', async () => {
    // Review finding, session 16: the upload answered 201 and its file stayed, served but neither
    // counted nor listed.
    const held = holdStorage(ctx.app.ctx.storage, 'put');
    try {
      const uploading = uploadImage(ctx.app, owner, { filename: 'a.png', bytes: PNG_1X1 });
      const listed = await vi.waitFor(
        async () => {
          const { items } = await getAs(ctx, owner, '/api/uploads/images');
          if (items.length !== 1) throw new Error('not listed yet');
          return items[0] as { key: string; url: string };
        },
        { timeout: 10_000 },
      );
      expect((await deleteUpload(ctx.app, owner, listed.key)).statusCode).toBe(200);
      held.release();
      const response = await uploading;
      expect(expectError(response, 409, 'CONFLICT').details.reason).toBe('DELETED_DURING_UPLOAD');
      expect((await ctx.app.inject({ method: 'GET', url: pathOf(listed.url) })).statusCode).toBe(404);
      expect(await getAs(ctx, owner, '/api/uploads/usage')).toMatchObject({ usedBytes: 0, files: 0 });
    } finally {
      held.restore();
    }
  });

  it('a storage that stops answering holds no database connection: other requests still answer', async () => {
    // Review finding, session 16: deletes held a connection (in a transaction) for their storage
    // call, so six deletes against a hanging storage took every connection of the pool (5 here).
    const own = await createTestContext('postgres');
    try {
      const team = await setupOwner(own.app);
      const keys: string[] = [];
      for (let i = 0; i < 6; i++) {
        keys.push((await uploadImage(own.app, team, { filename: 'a.png', bytes: PNG_1X1 })).json().data.key);
      }
      const held = holdStorage(own.app.ctx.storage, 'delete');
      try {
        const deleting = keys.map((key) => deleteUpload(own.app, team, key));
        await new Promise((resolve) => setTimeout(resolve, 300));
        const other = await setupOwner(own.app);
        const answered = await Promise.race([
          own.app.inject({ method: 'GET', url: '/api/templates', headers: sessionHeaders(own.app, other) }),
          new Promise<'stuck'>((resolve) => setTimeout(() => resolve('stuck'), 10_000)),
        ]);
        expect(answered === 'stuck' ? 'stuck' : answered.statusCode).toBe(200);
        held.release();
        expect((await Promise.all(deleting)).map((r) => r.statusCode)).toEqual([
          200, 200, 200, 200, 200, 200,
        ]);
      } finally {
        held.restore();
      }
    } finally {
      await own.close();
    }
  }, 30_000);

  it('deletes a row whose file is missing (a crash between row and file), freeing its quota', async () => {
    const key = `${owner.teamId}/img_01jz0000000000000000000000.png`;
    await ctx.app.ctx.database.db
      .insert(uploads)
      .values({ key, teamId: owner.teamId, contentType: 'image/png', size: SIZE });
    expect((await getAs(ctx, owner, '/api/uploads/usage')).files).toBe(1);
    expect((await deleteUpload(ctx.app, owner, key)).statusCode).toBe(200);
    expect((await getAs(ctx, owner, '/api/uploads/usage')).files).toBe(0);
    expectError(await deleteUpload(ctx.app, owner, key), 404, 'NOT_FOUND');
  });
});
