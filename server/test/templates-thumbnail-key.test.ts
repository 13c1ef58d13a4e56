import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { createContext } from '../src/context.ts';
import type { DatabaseHandle } from '../src/db/client.ts';
import { bindJobHandlers } from '../src/job-handlers.ts';
import { JobQueue } from '../src/jobs/queue.ts';
import { declareQueues, startWorkers } from '../src/jobs/registry.ts';
import type { PdfRenderer } from '../src/modules/pdf/index.ts';
import type { FileStorage } from '../src/modules/storage/index.ts';
import { deleteUserByEmail, removeDeletedTeamFiles } from '../src/modules/teams/index.ts';
import { createThumbnailHandler } from '../src/modules/templates/templates.thumbnail.ts';
import { createTestContext, TEST_BASE_URL, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { createTestDatabase } from './helpers/database.ts';
import { TEST_ENCRYPTION_KEY } from './helpers/encryption-key.ts';
import { buildTemplate, dashboardCall, dataOf } from './helpers/factories.ts';
import { startTestRenderer } from './helpers/pdf.ts';
import { PNG_1X1 } from './helpers/uploads.ts';

/**
 * Review finding newuser 2: a template's `thumbnailUrl` was stored absolute, with the BASE_URL (or
 * S3 public base) of its render time, so a change of BASE_URL broke every thumbnail, and the files
 * of such URLs were never deleted (only a URL equal to the current public URL counted as ours).
 * The storage key is stored now and the URL built when read; rows holding an old URL are mapped to
 * their key (migration 0018, and when read).
 */

/** A thumbnail key of `teamId`'s template `templateId` as the thumbnail job names them. */
function keyOf(teamId: string, templateId: string, hex = '0123456789abcdef'): string {
  return `${teamId}/thumbnails/${templateId}-${hex}.png`;
}

async function shownThumbnail(app: FastifyInstance, owner: { cookie: string }, id: string): Promise<string> {
  return (await dataOf(await dashboardCall(app, owner, 'GET', `/api/templates/${id}`))).thumbnailUrl;
}

async function listedThumbnail(app: FastifyInstance, owner: { cookie: string }, id: string): Promise<string> {
  const list = await dataOf(await dashboardCall(app, owner, 'GET', '/api/templates?pageSize=100'));
  return list.items.find((item: { id: string }) => item.id === id).thumbnailUrl;
}

async function storedThumbnail(app: FastifyInstance, id: string): Promise<string> {
  const { rows } = await app.ctx.database.pool.query('select thumbnail_url from templates where id = $1', [
    id,
  ]);
  return rows[0].thumbnail_url as string;
}

async function setStoredThumbnail(app: FastifyInstance, id: string, value: string): Promise<void> {
  await app.ctx.database.pool.query('update templates set thumbnail_url = $1 where id = $2', [value, id]);
}

/** Whether `storage` holds a file under `key` (the file's stream is closed again). */
async function isStored(storage: FileStorage, key: string): Promise<boolean> {
  const file = await storage.get(key);
  file?.body.destroy();
  return file !== undefined;
}

async function deleteTemplate(app: FastifyInstance, owner: { cookie: string }, id: string): Promise<void> {
  expect((await dashboardCall(app, owner, 'DELETE', `/api/templates/${id}`)).statusCode).toBe(200);
}

/**
 * One "process" over an existing database, as `postwright start` builds it: the app, the queue,
 * the context (its storage under `env.DATA_DIR`), with `env` over the test defaults. Two of them in
 * turn on one database and DATA_DIR are a restart with another configuration.
 */
async function bootOn(database: DatabaseHandle, env: Record<string, string>) {
  const config = loadConfig({
    BASE_URL: TEST_BASE_URL,
    LOG_LEVEL: 'silent',
    SETUP_TOKEN: 'test-setup-token-0123456789',
    ...env,
  });
  const queue = new JobQueue(database);
  await queue.start();
  await declareQueues(queue, config);
  const context = await createContext({ config, database, queue, encryptionKey: TEST_ENCRYPTION_KEY });
  const app = await buildApp(context);
  await app.ready();
  return {
    app,
    startWorkers: () => startWorkers(queue, config, bindJobHandlers(context)),
    async close() {
      await app.close();
      await queue.stop(2_000);
      await context.close();
    },
  };
}

describe('a thumbnail made under one BASE_URL, after a restart with another', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-thumbnail-key-'));
  let database: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is shown at the new BASE_URL, and its file goes with the last template showing it', async () => {
    // First run: the README's default BASE_URL, a renderer, the thumbnail job's real screenshot.
    const renderer = await startTestRenderer();
    const before = await bootOn(database.handle, {
      BASE_URL: 'http://localhost:3000',
      DATA_DIR: dataDir,
      PDF_RENDERER_URL: renderer.url,
    });
    let owner: Awaited<ReturnType<typeof setupOwner>>;
    let template: { id: string };
    let key: string;
    try {
      await before.startWorkers();
      owner = await setupOwner(before.app);
      template = await buildTemplate(before.app, owner, { name: 'Made before the move' });
      const url = await waitFor(
        async () => (await shownThumbnail(before.app, owner, template.id)) || undefined,
        30_000,
        'thumbnailUrl',
      );
      const prefix = `http://localhost:3000/files/${owner.teamId}/thumbnails/${template.id}-`;
      expect(url.startsWith(prefix), url).toBe(true);
      key = url.slice('http://localhost:3000/files/'.length);
      // What the row holds is the key, not the URL of this BASE_URL.
      expect(await storedThumbnail(before.app, template.id)).toBe(key);
    } finally {
      await before.close();
      await renderer.close();
    }

    // Second run: the same database and DATA_DIR, another public URL, no renderer.
    const after = await bootOn(database.handle, {
      BASE_URL: 'http://mail.example.test:8080',
      DATA_DIR: dataDir,
    });
    try {
      const moved = `http://mail.example.test:8080/files/${key}`;
      expect(await shownThumbnail(after.app, owner, template.id)).toBe(moved);
      expect(await listedThumbnail(after.app, owner, template.id)).toBe(moved);
      const file = await after.app.inject({ method: 'GET', url: `/files/${key}` });
      expect(file.statusCode).toBe(200);
      expect(file.headers['content-type']).toBe('image/png');

      // A duplicate shows the same file (its own job is not run here), so deleting the source
      // keeps the file; deleting the duplicate, the last template showing it, deletes it.
      const copy = await dataOf(
        await dashboardCall(after.app, owner, 'POST', `/api/templates/${template.id}/duplicate`, {}),
        201,
      );
      expect(await shownThumbnail(after.app, owner, copy.id)).toBe(moved);
      await deleteTemplate(after.app, owner, template.id);
      expect(await isStored(after.app.ctx.storage, key)).toBe(true);
      await deleteTemplate(after.app, owner, copy.id);
      expect(await isStored(after.app.ctx.storage, key)).toBe(false);
    } finally {
      await after.close();
    }
  });
});

describe('rows holding an absolute thumbnail URL of an older release', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('are shown at the URL of the current storage and their files deleted with them', async () => {
    const owner = await setupOwner(ctx.app);
    const { storage } = ctx.app.ctx;
    // As local storage under another BASE_URL, and as S3 (its bucket's default public base) made them.
    for (const old of [
      (key: string) => `http://localhost:33735/files/${key}`,
      (key: string) => `https://postwright.s3.eu-west-1.amazonaws.com/${key}`,
    ]) {
      const template = await buildTemplate(ctx.app, owner, { name: 'Old row' });
      const key = keyOf(owner.teamId, template.id);
      await storage.put(key, PNG_1X1, 'image/png');
      await setStoredThumbnail(ctx.app, template.id, old(key));

      expect(await shownThumbnail(ctx.app, owner, template.id)).toBe(`${TEST_BASE_URL}/files/${key}`);
      expect(await listedThumbnail(ctx.app, owner, template.id)).toBe(`${TEST_BASE_URL}/files/${key}`);
      await deleteTemplate(ctx.app, owner, template.id);
      expect(await isStored(storage, key)).toBe(false);
    }
  });

  it('keep the file while a duplicate shows it, the duplicate storing the key', async () => {
    const owner = await setupOwner(ctx.app);
    const { storage } = ctx.app.ctx;
    const source = await buildTemplate(ctx.app, owner, { name: 'Old source' });
    const key = keyOf(owner.teamId, source.id);
    await storage.put(key, PNG_1X1, 'image/png');
    await setStoredThumbnail(ctx.app, source.id, `http://old.example.test/files/${key}`);
    const copy = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/templates/${source.id}/duplicate`, {}),
      201,
    );
    expect(await storedThumbnail(ctx.app, copy.id)).toBe(key);
    expect(await shownThumbnail(ctx.app, owner, copy.id)).toBe(storage.publicUrl(key));
    await deleteTemplate(ctx.app, owner, source.id);
    expect(await isStored(storage, key)).toBe(true);
    await deleteTemplate(ctx.app, owner, copy.id);
    expect(await isStored(storage, key)).toBe(false);
  });

  it('have the file they name deleted when the thumbnail job replaces it', async () => {
    const owner = await setupOwner(ctx.app);
    const { storage } = ctx.app.ctx;
    const template = await buildTemplate(ctx.app, owner, { name: 'Replaced' });
    const oldKey = keyOf(owner.teamId, template.id);
    await storage.put(oldKey, PNG_1X1, 'image/png');
    await setStoredThumbnail(ctx.app, template.id, `http://old.example.test/files/${oldKey}`);

    const handler = createThumbnailHandler({
      db: ctx.context.database.db,
      storage,
      pdf: { screenshot: async () => Buffer.concat([PNG_1X1, Buffer.from('new')]) } as unknown as PdfRenderer,
    });
    await handler({ data: { templateId: template.id, teamId: owner.teamId } } as Parameters<
      typeof handler
    >[0]);

    const newKey = await storedThumbnail(ctx.app, template.id);
    expect(newKey).toMatch(new RegExp(`^${owner.teamId}/thumbnails/${template.id}-[0-9a-f]{16}\\.png$`));
    expect(newKey).not.toBe(oldKey);
    expect(await shownThumbnail(ctx.app, owner, template.id)).toBe(storage.publicUrl(newKey));
    expect(await isStored(storage, oldKey)).toBe(false);
    expect(await isStored(storage, newKey)).toBe(true);
  });

  it("never show nor delete another team's file", async () => {
    const owner = await setupOwner(ctx.app);
    const other = await setupOwner(ctx.app);
    const { storage } = ctx.app.ctx;
    const theirs = await buildTemplate(ctx.app, other, { name: 'Theirs' });
    const theirKey = keyOf(other.teamId, theirs.id);
    await storage.put(theirKey, PNG_1X1, 'image/png');
    for (const value of [theirKey, `http://localhost:3000/files/${theirKey}`]) {
      const mine = await buildTemplate(ctx.app, owner, { name: 'Pointing elsewhere' });
      await setStoredThumbnail(ctx.app, mine.id, value);
      expect(await shownThumbnail(ctx.app, owner, mine.id)).toBe('');
      await deleteTemplate(ctx.app, owner, mine.id);
      expect(await isStored(storage, theirKey)).toBe(true);
    }
  });

  it('are converted to their key by migration 0018', async () => {
    const owner = await setupOwner(ctx.app);
    const other = await setupOwner(ctx.app);
    const made = async (value: (id: string) => string) => {
      const template = await buildTemplate(ctx.app, owner, { name: 'Migrated' });
      await setStoredThumbnail(ctx.app, template.id, value(template.id));
      return template.id;
    };
    const local = await made((id) => `http://localhost:33735/files/${keyOf(owner.teamId, id)}`);
    const s3 = await made(
      (id) => `https://cdn.example.test/emails/${keyOf(owner.teamId, id, 'fedcba9876543210')}`,
    );
    const otherTeams = await made((id) => `http://localhost:33735/files/${keyOf(other.teamId, id)}`);
    const notAThumbnail = await made(() => 'https://cdn.example.test/logo.png');
    const already = await made((id) => keyOf(owner.teamId, id));
    const none = await made(() => '');

    const migration = readFileSync(
      new URL('../src/db/migrations/0018_thumbnail_keys.sql', import.meta.url),
      'utf8',
    );
    await ctx.app.ctx.database.pool.query(migration);

    expect(await storedThumbnail(ctx.app, local)).toBe(keyOf(owner.teamId, local));
    expect(await storedThumbnail(ctx.app, s3)).toBe(keyOf(owner.teamId, s3, 'fedcba9876543210'));
    expect(await storedThumbnail(ctx.app, otherTeams)).toBe(
      `http://localhost:33735/files/${keyOf(other.teamId, otherTeams)}`,
    );
    expect(await storedThumbnail(ctx.app, notAThumbnail)).toBe('https://cdn.example.test/logo.png');
    expect(await storedThumbnail(ctx.app, already)).toBe(keyOf(owner.teamId, already));
    expect(await storedThumbnail(ctx.app, none)).toBe('');
  });
});

describe('delete-user and the thumbnails of the teams it deletes', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('removes the files of stored keys and of URLs made under another BASE_URL', async () => {
    const owner = await setupOwner(ctx.app);
    const { storage } = ctx.app.ctx;
    const current = await buildTemplate(ctx.app, owner, { name: 'Key' });
    const older = await buildTemplate(ctx.app, owner, { name: 'Old URL' });
    const currentKey = keyOf(owner.teamId, current.id);
    const olderKey = keyOf(owner.teamId, older.id);
    await storage.put(currentKey, PNG_1X1, 'image/png');
    await storage.put(olderKey, PNG_1X1, 'image/png');
    await setStoredThumbnail(ctx.app, current.id, currentKey);
    await setStoredThumbnail(ctx.app, older.id, `http://localhost:33735/files/${olderKey}`);

    const { deletedTeams } = await deleteUserByEmail(ctx.context.database.db, owner.email);
    expect(deletedTeams.map((team) => team.id)).toEqual([owner.teamId]);
    const { removed, absent, left } = await removeDeletedTeamFiles(storage, deletedTeams);
    expect(removed.sort()).toEqual([currentKey, olderKey].sort());
    expect({ absent, left }).toEqual({ absent: [], left: [] });
    expect(await isStored(storage, currentKey)).toBe(false);
    expect(await isStored(storage, olderKey)).toBe(false);
  });
});

describe('thumbnails while S3 is chosen but not configured', () => {
  it('are shown as none (no URL can be built) and the template still reads and lists', async () => {
    const ctx = await createTestContext('postgres', { STORAGE: 's3' });
    try {
      expect(ctx.app.ctx.storage.kind).toBe('unconfigured');
      const owner = await setupOwner(ctx.app);
      const template = await buildTemplate(ctx.app, owner, { name: 'Unconfigured storage' });
      await setStoredThumbnail(ctx.app, template.id, keyOf(owner.teamId, template.id));
      expect(await shownThumbnail(ctx.app, owner, template.id)).toBe('');
      expect(await listedThumbnail(ctx.app, owner, template.id)).toBe('');
      // The delete answers; the file cannot be reached, so nothing is released.
      await deleteTemplate(ctx.app, owner, template.id);
    } finally {
      await ctx.close();
    }
  });
});
