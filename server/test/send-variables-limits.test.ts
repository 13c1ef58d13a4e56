import { count, eq } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { emailLogs } from '../src/db/schema/index.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { sessionHeaders, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildSmtpAdapter,
  buildTemplate,
  expectError,
  send,
  simpleDesign,
} from './helpers/factories.ts';
import { closedPort } from './helpers/smtp-server.ts';

/** `{ note: 'x…x' }` whose JSON text is exactly `bytes` bytes. */
function noteOfBytes(bytes: number): { note: string } {
  return { note: 'x'.repeat(bytes - JSON.stringify({ note: '' }).length) };
}

/** A team with a template reading `note` and `items`, an API key and an adapter never contacted. */
async function sendingTeam(ctx: TestContext) {
  const owner = await setupOwner(ctx.app);
  const key = (await buildApiKey(ctx.app, owner)).key;
  await buildSmtpAdapter(ctx.app, owner, await closedPort()); // workers are not started: nothing is delivered
  const template = await buildTemplate(ctx.app, owner, {
    name: 'Limits',
    designJson: simpleDesign('{{ note | size }} {{ items | sort_natural | size }}'),
  });
  return { owner, key, templateId: template.id as string };
}

async function logCount(ctx: TestContext, teamId: string): Promise<number> {
  const [row] = await ctx.app.ctx.database.db
    .select({ n: count() })
    .from(emailLogs)
    .where(eq(emailLogs.teamId, teamId));
  return row?.n ?? 0;
}

describe('variables limits with the default configuration', () => {
  let ctx: TestContext;
  let team: Awaited<ReturnType<typeof sendingTeam>>;
  const sendWith = (variables: Record<string, unknown>) =>
    send(ctx.app, team.key, { templateId: team.templateId, to: 'x@example.test', variables });

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    team = await sendingTeam(ctx);
  });
  afterAll(() => ctx?.close());

  it('accepts variables of exactly 262144 bytes of JSON and refuses one byte more, naming the limit', async () => {
    expect(ctx.config.SEND_VARIABLES_MAX_BYTES).toBe(262_144);
    const accepted = await sendWith(noteOfBytes(262_144));
    expect(accepted.statusCode, accepted.body).toBe(202);
    const before = await logCount(ctx, team.owner.teamId);
    const error = expectError(await sendWith(noteOfBytes(262_145)), 400, 'VALIDATION_ERROR');
    expect(error.details.issues).toEqual([
      {
        path: 'body.variables',
        message: 'Variables must be at most 262144 bytes as JSON (SEND_VARIABLES_MAX_BYTES)',
      },
    ]);
    expect(await logCount(ctx, team.owner.teamId)).toBe(before);
  });

  it('accepts an array of 10,000 items and refuses 10,001, with the path of the array', async () => {
    const accepted = await sendWith({ items: new Array(10_000).fill('a') });
    expect(accepted.statusCode, accepted.body).toBe(202);
    const error = expectError(
      await sendWith({ order: { items: new Array(10_001).fill(0) } }),
      400,
      'VALIDATION_ERROR',
    );
    expect(error.details.issues).toEqual([
      {
        path: 'body.variables.order.items',
        message:
          'Arrays in variables must have at most 10000 items, this one has 10001 (SEND_VARIABLES_MAX_ARRAY_LENGTH)',
      },
    ]);
  });

  it('refuses the 900,000-element sort_natural of issue #8 at validation, before any render', async () => {
    const names = new Array(900_000).fill('n');
    const error = expectError(await sendWith({ items: names }), 400, 'VALIDATION_ERROR');
    expect(error.details.issues[0].path).toBe('body.variables.items');
  });

  it('holds the variables of a PDF attachment to the same limits', async () => {
    const response = await send(ctx.app, team.key, {
      templateId: team.templateId,
      to: 'x@example.test',
      pdfAttachments: [
        { templateId: team.templateId, filename: 'a.pdf', variables: { items: new Array(10_001) } },
      ],
    });
    const error = expectError(response, 400, 'VALIDATION_ERROR');
    expect(error.details.issues[0].path).toBe('body.pdfAttachments.0.variables.items');
  });

  it('holds a preview to the same limits', async () => {
    const preview = (variables: Record<string, unknown>) =>
      ctx.app.inject({
        method: 'POST',
        url: `/api/templates/${team.templateId}/preview`,
        headers: sessionHeaders(ctx.app, team.owner),
        payload: { variables },
      });
    const ok = await preview({ ...noteOfBytes(1000), items: ['b', 'A', 'c'] });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().data.html).toContain('989 3');
    const tooBig = expectError(await preview(noteOfBytes(262_145)), 400, 'VALIDATION_ERROR');
    expect(tooBig.details.issues[0].message).toContain('262144 bytes');
    const tooLong = expectError(await preview({ items: new Array(10_001).fill(1) }), 400, 'VALIDATION_ERROR');
    expect(tooLong.details.issues[0].path).toBe('body.variables.items');
  });
});

describe('array filters over the largest array a caller may send', () => {
  let ctx: TestContext;
  let owner: TeamOwner;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
  });
  afterAll(() => ctx?.close());

  it('refuses a chain of sorts by the memory budget, each sort charged before it runs (issue #8)', async () => {
    const previewOf = async (text: string) => {
      const template = await buildTemplate(ctx.app, owner, {
        name: `Sorts ${text}`,
        designJson: simpleDesign(text),
      });
      return ctx.app.inject({
        method: 'POST',
        url: `/api/templates/${template.id}/preview`,
        headers: sessionHeaders(ctx.app, owner),
        payload: {
          variables: { items: Array.from({ length: 10_000 }, (_, i) => `Item ${(i * 7919) % 10_000}`) },
        },
      });
    };
    // One output: the clock (checked between nodes) cannot stop it, only the budget can. Each
    // sort_natural of 10,000 items costs 10,000 × (14 comparisons × 2 + 1) = 290,000 units of 1,000,000.
    const three = await previewOf('{{ items | sort_natural | sort_natural | sort_natural | first }}');
    expect(three.statusCode, three.body).toBe(200);
    expect(three.json().data.html).toContain('Item 0');
    const four = await previewOf(
      '{{ items | sort_natural | sort_natural | sort_natural | sort_natural | first }}',
    );
    const error = expectError(four, 400, 'INVALID_TEMPLATE');
    expect(error.details.reason).toBe('LIMIT_EXCEEDED');
    expect(error.details.issues[0].message).toMatch(/memory alloc limit exceeded/);
  });
});

describe('variables limits from SEND_VARIABLES_MAX_BYTES and SEND_VARIABLES_MAX_ARRAY_LENGTH', () => {
  let ctx: TestContext;
  let team: Awaited<ReturnType<typeof sendingTeam>>;

  beforeAll(async () => {
    ctx = await createTestContext('postgres', {
      SEND_VARIABLES_MAX_BYTES: '2048',
      SEND_VARIABLES_MAX_ARRAY_LENGTH: '3',
    });
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    team = await sendingTeam(ctx);
  });
  afterAll(() => ctx?.close());

  it('applies the configured limits', async () => {
    const sendWith = (variables: Record<string, unknown>) =>
      send(ctx.app, team.key, { templateId: team.templateId, to: 'x@example.test', variables });
    expect((await sendWith({ ...noteOfBytes(1024), items: [1, 2, 3] })).statusCode).toBe(202);
    const tooLong = expectError(await sendWith({ items: [1, 2, 3, 4] }), 400, 'VALIDATION_ERROR');
    expect(tooLong.details.issues[0].message).toContain('at most 3 items');
    expect((await sendWith(noteOfBytes(2048))).statusCode).toBe(202);
    const tooBig = expectError(await sendWith(noteOfBytes(2049)), 400, 'VALIDATION_ERROR');
    expect(tooBig.details.issues[0].message).toContain('at most 2048 bytes');
  });

  it.each([
    [{ SEND_VARIABLES_MAX_BYTES: '100' }, /^Invalid SEND_VARIABLES_MAX_BYTES: /],
    [{ SEND_VARIABLES_MAX_BYTES: 'lots' }, /^Invalid SEND_VARIABLES_MAX_BYTES: /],
    [{ SEND_VARIABLES_MAX_BYTES: String(11 * 1024 * 1024) }, /^Invalid SEND_VARIABLES_MAX_BYTES: /],
    [{ SEND_VARIABLES_MAX_ARRAY_LENGTH: '0' }, /^Invalid SEND_VARIABLES_MAX_ARRAY_LENGTH: /],
    [{ SEND_VARIABLES_MAX_ARRAY_LENGTH: '2000000' }, /^Invalid SEND_VARIABLES_MAX_ARRAY_LENGTH: /],
  ])('refuses %o at start-up with a one-line error naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
