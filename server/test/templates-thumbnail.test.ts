import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningPdfRenderer } from '../src/modules/pdf/renderer/renderer.server.ts';
import { createTestContext, TEST_BASE_URL, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { buildTemplate, dashboardCall, dataOf, simpleDesign } from './helpers/factories.ts';
import { startTestRenderer } from './helpers/pdf.ts';
import { closedPort } from './helpers/smtp-server.ts';

/**
 * Issue #12 template thumbnails: a save queues a screenshot job; the worker stores a PNG and sets
 * `thumbnailUrl`. A renderer failure never blocks or fails the save.
 */
async function thumbnailJobStates(ctx: TestContext, templateId: string): Promise<string[]> {
  const result = await ctx.context.database.pool.query(
    `select state from pgboss.job where name = 'template.thumbnail' and data->>'templateId' = $1`,
    [templateId],
  );
  return result.rows.map((row) => row.state as string);
}

/** The status code of GET on a stored file's public URL (through the app). */
async function fileStatus(ctx: TestContext, url: string): Promise<number> {
  return (await ctx.app.inject({ method: 'GET', url: url.slice(TEST_BASE_URL.length) })).statusCode;
}

async function thumbnailUrlOf(ctx: TestContext, owner: { cookie: string }, id: string): Promise<string> {
  return (await dataOf(await dashboardCall(ctx.app, owner, 'GET', `/api/templates/${id}`))).thumbnailUrl;
}

describe('template thumbnails', () => {
  let ctx: TestContext;
  let renderer: RunningPdfRenderer;

  beforeAll(async () => {
    renderer = await startTestRenderer();
    ctx = await createTestContext('postgres', { PDF_RENDERER_URL: renderer.url });
    await ctx.startWorkers();
  });

  afterAll(async () => {
    await ctx?.close();
    await renderer?.close();
  });

  it('stores a PNG screenshot on create and sets thumbnailUrl; a new design gets a new one', async () => {
    const owner = await setupOwner(ctx.app);
    const template = await buildTemplate(ctx.app, owner, { name: 'Thumbnailed' });
    const url = await waitFor(
      async () => (await thumbnailUrlOf(ctx, owner, template.id)) || undefined,
      30_000,
      'thumbnailUrl',
    );
    expect(url.startsWith(`${TEST_BASE_URL}/files/${owner.teamId}/thumbnails/${template.id}-`)).toBe(true);
    const file = await ctx.app.inject({ method: 'GET', url: url.slice(TEST_BASE_URL.length) });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
    const png = file.rawPayload;
    expect(png.readUInt32BE(16)).toBe(600);
    expect(png.readUInt32BE(20)).toBe(800);

    const list = await dataOf(await dashboardCall(ctx.app, owner, 'GET', '/api/templates'));
    expect(list.items.find((item: { id: string }) => item.id === template.id).thumbnailUrl).toBe(url);

    await dataOf(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${template.id}`, {
        designJson: simpleDesign('A completely different design with much more text in it'),
      }),
    );
    const next = await waitFor(async () => {
      const current = await thumbnailUrlOf(ctx, owner, template.id);
      return current !== url ? current : undefined;
    }, 30_000);
    expect(next).toMatch(/\.png$/);
    // The replaced thumbnail's file is deleted once nothing shows it any more.
    await expect.poll(() => fileStatus(ctx, url), { timeout: 10_000 }).toBe(404);
    expect(await fileStatus(ctx, next)).toBe(200);
  });

  it('keeps a thumbnail a duplicate still shows; deletes it with the last template showing it', async () => {
    const owner = await setupOwner(ctx.app);
    const source = await buildTemplate(ctx.app, owner, { name: 'Source' });
    const url = await waitFor(
      async () => (await thumbnailUrlOf(ctx, owner, source.id)) || undefined,
      30_000,
      'thumbnailUrl',
    );
    const copy = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/templates/${source.id}/duplicate`, {}),
      201,
    );
    expect(await thumbnailUrlOf(ctx, owner, copy.id)).toBe(url);

    await dataOf(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${source.id}`, {
        designJson: simpleDesign('The source moves on to another design'),
      }),
    );
    const next = await waitFor(async () => {
      const current = await thumbnailUrlOf(ctx, owner, source.id);
      return current !== url ? current : undefined;
    }, 30_000);
    expect(await fileStatus(ctx, url)).toBe(200);

    expect((await dashboardCall(ctx.app, owner, 'DELETE', `/api/templates/${copy.id}`)).statusCode).toBe(200);
    expect(await fileStatus(ctx, url)).toBe(404);
    expect((await dashboardCall(ctx.app, owner, 'DELETE', `/api/templates/${source.id}`)).statusCode).toBe(
      200,
    );
    expect(await fileStatus(ctx, next)).toBe(404);
  });

  it('queues no thumbnail for a save that does not change the design', async () => {
    const owner = await setupOwner(ctx.app);
    const template = await buildTemplate(ctx.app, owner, { name: 'Renamed only' });
    await dataOf(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${template.id}`, { description: 'new' }),
    );
    expect(await thumbnailJobStates(ctx, template.id)).toHaveLength(1);
  });
});

describe('template thumbnails without a working renderer', () => {
  it('saves at once when the renderer is down; the job fails, thumbnailUrl stays empty', async () => {
    const ctx = await createTestContext('postgres', {
      PDF_RENDERER_URL: `http://127.0.0.1:${await closedPort()}`,
    });
    try {
      await ctx.startWorkers();
      const owner = await setupOwner(ctx.app);
      const started = Date.now();
      const template = await buildTemplate(ctx.app, owner, { name: 'No renderer' });
      expect(Date.now() - started).toBeLessThan(5_000);
      await waitFor(
        async () =>
          (await thumbnailJobStates(ctx, template.id)).some((s) => s === 'retry' || s === 'failed')
            ? true
            : undefined,
        30_000,
        'the failed thumbnail attempt',
      );
      expect(await thumbnailUrlOf(ctx, owner, template.id)).toBe('');
    } finally {
      await ctx.close();
    }
  });

  it('queues no thumbnail job when no renderer is configured', async () => {
    const ctx = await createTestContext('postgres');
    try {
      const owner = await setupOwner(ctx.app);
      const template = await buildTemplate(ctx.app, owner, { name: 'Unconfigured' });
      expect(await thumbnailJobStates(ctx, template.id)).toEqual([]);
    } finally {
      await ctx.close();
    }
  });
});
