import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PdfRenderer } from '../src/modules/pdf/index.ts';
import type { RunningPdfRenderer } from '../src/modules/pdf/renderer/renderer.server.ts';
import { createThumbnailHandler } from '../src/modules/templates/templates.thumbnail.ts';
import { createTestContext, TEST_BASE_URL, type TestContext, waitFor } from './helpers/app.ts';
import { setupOwner } from './helpers/auth.ts';
import { buildTemplate, dashboardCall, dataOf, simpleDesign } from './helpers/factories.ts';
import { startTestRenderer } from './helpers/pdf.ts';
import { closedPort } from './helpers/smtp-server.ts';
import { PNG_1X1 } from './helpers/uploads.ts';

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

  it('gives a duplicate a thumbnail of its own; deletes each file with the last template showing it', async () => {
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
    // The copy shows the source's thumbnail until its own job has made one (session 16: every
    // copy gets a job, as the source's may show an older design).
    const own = await waitFor(async () => {
      const current = await thumbnailUrlOf(ctx, owner, copy.id);
      return current && current !== url ? current : undefined;
    }, 30_000);
    expect(await fileStatus(ctx, url)).toBe(200);

    await dataOf(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${source.id}`, {
        designJson: simpleDesign('The source moves on to another design'),
      }),
    );
    const next = await waitFor(async () => {
      const current = await thumbnailUrlOf(ctx, owner, source.id);
      return current !== url ? current : undefined;
    }, 30_000);
    // The job releases the file it replaced after setting the new one.
    await waitFor(async () => ((await fileStatus(ctx, url)) === 404 ? true : undefined), 10_000);
    expect(await fileStatus(ctx, own)).toBe(200);

    expect((await dashboardCall(ctx.app, owner, 'DELETE', `/api/templates/${copy.id}`)).statusCode).toBe(200);
    expect(await fileStatus(ctx, own)).toBe(404);
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

/**
 * Review findings, session 14: thumbnail files against concurrent changes. The handler runs here
 * with a stand-in screenshot (its bytes chosen by the test); the app's queue has a renderer
 * configured (a closed port) but no worker, so saves and duplicates queue jobs that never run.
 */
describe('thumbnail files when templates change meanwhile', () => {
  let ctx: TestContext;
  let owner: Awaited<ReturnType<typeof setupOwner>>;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', { PDF_RENDERER_URL: `http://127.0.0.1:${await closedPort()}` });
  });
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  /** Runs the thumbnail job of `templateId` with a screenshot of `bytes`; `during` runs while it is "taken". */
  async function runThumbnailJob(templateId: string, bytes: Buffer, during?: () => Promise<void>) {
    const handler = createThumbnailHandler({
      db: ctx.context.database.db,
      storage: ctx.app.ctx.storage,
      pdf: {
        screenshot: async () => {
          await during?.();
          return bytes;
        },
      } as unknown as PdfRenderer,
    });
    await handler({ data: { templateId, teamId: owner.teamId } } as Parameters<typeof handler>[0]);
  }

  /** The public URL the handler stores `bytes` at for `templateId`. */
  function urlOf(templateId: string, bytes: Buffer): string {
    const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
    return ctx.app.ctx.storage.publicUrl(`${owner.teamId}/thumbnails/${templateId}-${hash}.png`);
  }

  const first = Buffer.concat([PNG_1X1, Buffer.from('first')]);
  const second = Buffer.concat([PNG_1X1, Buffer.from('second')]);

  it('deletes the file it stored when the design changed during the screenshot', async () => {
    const template = await buildTemplate(ctx.app, owner, { name: 'Edited meanwhile' });
    await runThumbnailJob(template.id, first, async () => {
      await dataOf(
        await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${template.id}`, {
          designJson: simpleDesign('Saved while the screenshot was taken'),
        }),
      );
    });
    expect(await thumbnailUrlOf(ctx, owner, template.id)).toBe('');
    expect(await fileStatus(ctx, urlOf(template.id, first))).toBe(404);
  });

  it('keeps the thumbnail a duplicate shows when the source gets a new one while the duplicate is being saved', async () => {
    const source = await buildTemplate(ctx.app, owner, { name: 'Thumb' });
    await runThumbnailJob(source.id, first);
    const shown = urlOf(source.id, first);
    expect(await thumbnailUrlOf(ctx, owner, source.id)).toBe(shown);

    // Another transaction holds the slug the duplicate will choose, so the duplicate waits inside
    // its transaction (after reading its source) while the source gets its next thumbnail.
    const blocker = await ctx.context.database.pool.connect();
    try {
      await blocker.query('begin');
      const blockerPid = (await blocker.query('select pg_backend_pid() as pid')).rows[0].pid as number;
      await blocker.query(
        `insert into templates (id, team_id, name, slug, subject, design_json, compiled_html, variables)
          select 'tpl_blocker', team_id, name, slug || '-copy', subject, design_json, compiled_html, variables
          from templates where id = $1`,
        [source.id],
      );
      const duplicating = dashboardCall(ctx.app, owner, 'POST', `/api/templates/${source.id}/duplicate`, {});
      await waitFor(async () => {
        // The duplicate waits for this blocker (other test files share the server: only its waiter counts).
        const { rows } = await ctx.context.database.pool.query(
          'select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))',
          [blockerPid],
        );
        return rows[0].n > 0 ? true : undefined;
      });
      const replacing = runThumbnailJob(source.id, second);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await blocker.query('rollback');
      const copy = await dataOf(await duplicating, 201);
      await replacing;
      expect(await thumbnailUrlOf(ctx, owner, source.id)).toBe(urlOf(source.id, second));
      expect(await thumbnailUrlOf(ctx, owner, copy.id)).toBe(shown);
      expect(await fileStatus(ctx, shown)).toBe(200);
    } finally {
      blocker.release();
    }
  });

  it("gives a copy its own job even when the source shows a thumbnail (it may be an older design's)", async () => {
    const source = await buildTemplate(ctx.app, owner, { name: 'Shown' });
    await runThumbnailJob(source.id, first);
    // The design changes; its thumbnail job has not run when the copy is made.
    await dataOf(
      await dashboardCall(ctx.app, owner, 'PUT', `/api/templates/${source.id}`, {
        designJson: simpleDesign('A newer design'),
      }),
    );
    const copy = await dataOf(
      await dashboardCall(ctx.app, owner, 'POST', `/api/templates/${source.id}/duplicate`, {}),
      201,
    );
    expect(await thumbnailUrlOf(ctx, owner, copy.id)).toBe(urlOf(source.id, first));
    expect(await thumbnailJobStates(ctx, copy.id)).toHaveLength(1);
  });

  it('gives concurrent duplicates a slug each, and a copy of a template without a thumbnail a job', async () => {
    const source = await buildTemplate(ctx.app, owner, { name: 'Doubled' });
    const copies = await Promise.all(
      Array.from({ length: 4 }, () =>
        dashboardCall(ctx.app, owner, 'POST', `/api/templates/${source.id}/duplicate`, {}),
      ),
    );
    expect(copies.map((response) => response.statusCode)).toEqual([201, 201, 201, 201]);
    const slugs = copies.map((response) => response.json().data.slug as string);
    expect(new Set(slugs).size).toBe(4);
    // The source's own job has not run (no worker here): each copy got one of its own.
    for (const response of copies) {
      expect(await thumbnailJobStates(ctx, response.json().data.id)).toHaveLength(1);
    }
  });
});
